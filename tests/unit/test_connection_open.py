"""Connections read from their transports directly (no reader task), on both ends: answers, the peer closing,
a peer that breaks the framing, and a local close; on asyncio's loop and on uvloop (the ``fast`` extra)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.connection import Connection, FrameProtocol, HandlerResult, listen
from graymq.protocol.errors import ConnectionClosedError
from graymq.protocol.remoting import response_envelope

pytestmark = pytest.mark.unit


def _uvloop() -> Any:
    return pytest.importorskip("uvloop").new_event_loop


@pytest.fixture(params=["asyncio", "uvloop"])
def loop_factory(request: pytest.FixtureRequest) -> Any:
    return None if request.param == "asyncio" else _uvloop()


def serve(loop_factory: Any,
          scenario: Callable[[Connection, list[Connection], list[asyncio.Transport]], Awaitable[None]]) -> None:
    """A server answering GET_MIN_OFFSET with 7 (GET_MAX_OFFSET: never), a client opened to it."""
    def answer(conn: Connection, envelope: pb.Envelope) -> HandlerResult:
        if envelope.method == pb.GET_MIN_OFFSET:
            return response_envelope(pb.GET_MIN_OFFSET, pb.OffsetResponse(offset=7))
        return asyncio.get_running_loop().create_future()

    async def main() -> None:
        accepted: list[Connection] = []
        writers: list[asyncio.Transport] = []

        def on_client(transport: asyncio.Transport, protocol: FrameProtocol) -> None:
            accepted.append(Connection(transport, protocol, answer))
            writers.append(transport)

        server = await listen("127.0.0.1", 0, on_client)
        port = server.sockets[0].getsockname()[1]
        client = await Connection.open("127.0.0.1", port)
        try:
            await asyncio.wait_for(scenario(client, accepted, writers), 10)  # a hang guard, not a speed check
        finally:
            await client.close()
            for conn in accepted:
                await conn.close()
            server.close()
            await server.wait_closed()

    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(main())


def queue_request() -> pb.QueueRequest:
    return pb.QueueRequest(topic="T", queue_id=0)


def test_pipelined_requests_are_all_answered(loop_factory: Any) -> None:
    async def scenario(client: Connection, accepted: list[Connection], writers: list[asyncio.Transport]) -> None:
        answers = await asyncio.gather(*(client.request(pb.GET_MIN_OFFSET, queue_request()) for _ in range(50)))
        assert {a.offset for a in answers} == {7}  # type: ignore[attr-defined]
        assert not client.busy

    serve(loop_factory, scenario)


def test_the_peer_closing_fails_what_is_pending_and_closes_the_connection(loop_factory: Any) -> None:
    async def scenario(client: Connection, accepted: list[Connection], writers: list[asyncio.Transport]) -> None:
        pending = asyncio.ensure_future(client.request(pb.GET_MAX_OFFSET, queue_request(), timeout=30))
        while not accepted or not accepted[0].busy:
            await asyncio.sleep(0.01)
        await accepted[0].close()
        with pytest.raises(ConnectionClosedError):
            await pending
        await client.closed.wait()
        assert client.close_reason == "closed by peer"

    serve(loop_factory, scenario)


def test_a_peer_breaking_the_framing_closes_the_connection(loop_factory: Any) -> None:
    async def scenario(client: Connection, accepted: list[Connection], writers: list[asyncio.Transport]) -> None:
        await client.request(pb.GET_MIN_OFFSET, queue_request())
        writers[0].write(b"\x00\x01\x02\x03 not a frame")
        await client.closed.wait()
        assert client.close_reason.startswith("protocol error: bad frame token")
        with pytest.raises(ConnectionClosedError):
            await client.request(pb.GET_MIN_OFFSET, queue_request())

    serve(loop_factory, scenario)


def test_closing_locally_fails_what_is_pending(loop_factory: Any) -> None:
    async def scenario(client: Connection, accepted: list[Connection], writers: list[asyncio.Transport]) -> None:
        pending = asyncio.ensure_future(client.request(pb.GET_MAX_OFFSET, queue_request(), timeout=30))
        await asyncio.sleep(0.05)
        await client.close()
        with pytest.raises(ConnectionClosedError):
            await pending
        assert client.is_closed and client.close_reason == "closed locally"

    serve(loop_factory, scenario)
