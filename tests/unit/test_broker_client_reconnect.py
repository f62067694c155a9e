"""A BrokerClient tells ``on_reconnected`` of each new connection to an address that had one before (the broker
forgot what the closed one registered), not of the first; a listener that raises does not fail the call that
opened the connection."""

from __future__ import annotations

import asyncio

import pytest

from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.broker_client import BrokerClient
from graymq.protocol.connection import Connection, FrameProtocol, HandlerResult, listen
from graymq.protocol.remoting import response_envelope

pytestmark = pytest.mark.unit


def test_only_a_connection_opened_again_is_told_and_a_failing_listener_does_not_fail_the_call() -> None:
    def answer(conn: Connection, envelope: pb.Envelope) -> HandlerResult:
        return response_envelope(pb.HEARTBEAT, pb.HeartbeatResponse(client_expiry_ms=1))

    async def main() -> list[str]:
        accepted: list[Connection] = []

        def on_client(transport: asyncio.Transport, protocol: FrameProtocol) -> None:
            accepted.append(Connection(transport, protocol, answer))

        told: list[str] = []

        def reconnected(address: str) -> None:
            told.append(address)
            raise RuntimeError("a listener's fault")

        server = await listen("127.0.0.1", 0, on_client)
        address = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
        client = BrokerClient(on_reconnected=reconnected, tls=False)
        try:
            await client.heartbeat(address, pb.HeartbeatRequest(client_id="c"))
            await client.heartbeat(address, pb.HeartbeatRequest(client_id="c"))  # the same connection
            assert told == []
            await (await client.connection(address)).close()
            answered = await client.heartbeat(address, pb.HeartbeatRequest(client_id="c"))
            assert answered.client_expiry_ms == 1
            return [a.replace(address, "the broker") for a in told]
        finally:
            await client.close()
            for conn in accepted:
                await conn.close()
            server.close()
            await server.wait_closed()

    assert asyncio.run(main()) == ["the broker"]
