"""Connection over an in-process socket pair: hand-written envelopes, request deadlines on one shared timer."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable

import pytest

from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.connection import Connection, FrameProtocol, HandlerResult
from graymq.protocol.errors import RequestTimeoutError
from graymq.protocol.remoting import request_envelope, response_envelope

pytestmark = pytest.mark.unit

BODIES = [pb.Empty()] + [pb.SendRequest(producer_group="g", message=pb.Message(topic="t", body=b"x" * n))
                         for n in (0, 5, 127, 128, 20_000, 3_000_000)]


@pytest.mark.parametrize("method", [*pb.Method.values(), 200, 70_000])
def test_hand_written_envelopes_are_byte_for_byte_protobufs(method: int) -> None:
    for body in BODIES:
        data = body.SerializeToString()
        for oneway in (False, True):
            assert request_envelope(method, body, oneway) == pb.Envelope(
                method=method, oneway=oneway, body=data).SerializeToString()  # type: ignore[arg-type]
        assert response_envelope(method, body) == pb.Envelope(
            method=method, is_response=True, body=data).SerializeToString()  # type: ignore[arg-type]
    assert response_envelope(method) == pb.Envelope(method=method, is_response=True).SerializeToString()  # type: ignore[arg-type]


def answer_min_never_max(conn: Connection, envelope: pb.Envelope) -> HandlerResult:
    """GET_MIN_OFFSET answers at once; GET_MAX_OFFSET never does."""
    if envelope.method == pb.GET_MIN_OFFSET:
        return response_envelope(pb.GET_MIN_OFFSET, pb.OffsetResponse(offset=7))
    return asyncio.get_running_loop().create_future()


def with_pair(scenario: Callable[[Connection], Awaitable[None]]) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        a, b = socket.socketpair()
        server = Connection(*await loop.create_connection(FrameProtocol, sock=a), answer_min_never_max)
        client = Connection(*await loop.create_connection(FrameProtocol, sock=b))
        try:
            await asyncio.wait_for(scenario(client), 10)  # a hang guard, not a speed check
        finally:
            await client.close()
            await server.close()

    asyncio.run(main())


def ask(conn: Connection, method: int, timeout: float) -> Awaitable[object]:
    return conn.request(method, pb.QueueRequest(topic="T", queue_id=0), timeout)


def test_a_short_deadline_after_a_long_one_still_expires_first() -> None:
    async def scenario(conn: Connection) -> None:
        long = asyncio.ensure_future(ask(conn, pb.GET_MAX_OFFSET, 60))
        await asyncio.sleep(0)
        with pytest.raises(RequestTimeoutError, match="GET_MAX_OFFSET"):
            await ask(conn, pb.GET_MAX_OFFSET, 0.05)
        assert not long.done()
        long.cancel()

    with_pair(scenario)


def test_answered_requests_do_not_expire_and_unanswered_ones_do() -> None:
    async def scenario(conn: Connection) -> None:
        hanging = [asyncio.ensure_future(ask(conn, pb.GET_MAX_OFFSET, t)) for t in (0.3, 0.1)]
        answers = await asyncio.gather(*(ask(conn, pb.GET_MIN_OFFSET, 0.2) for _ in range(50)))
        assert [a.offset for a in answers] == [7] * 50  # type: ignore[attr-defined]
        for request in hanging:
            with pytest.raises(RequestTimeoutError):
                await request
        later = await ask(conn, pb.GET_MIN_OFFSET, 0.2)  # the timer re-arms for new requests
        assert later.offset == 7  # type: ignore[attr-defined]
        with pytest.raises(RequestTimeoutError):
            await ask(conn, pb.GET_MAX_OFFSET, 0.05)

    with_pair(scenario)
