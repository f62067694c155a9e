"""Auto batching apart from the producer: the sends of one loop turn leave together, a lone one alone; a full
batch leaves at once; flush sends what is open; a failed batch fails each of its futures; a refused one is
resent message by message."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from graymq.client.accumulator import BatchKey, Fields, MessageAccumulator
from graymq.client.message import MessageQueue, SendResult, SendStatus
from graymq.protocol.errors import GrayMQError, MessageTooLargeError, RequestTimeoutError

pytestmark = pytest.mark.unit

KEY: BatchKey = ("T", False, None)


class FakeSender:
    """Records each request as ("one"|"batch", bodies); ``batch_error`` fails batches, ``bad`` fails that body."""

    def __init__(self, batch_error: GrayMQError | None = None, bad: bytes | None = None) -> None:
        self.requests: list[tuple[str, list[bytes]]] = []
        self.batch_error = batch_error
        self.bad = bad

    async def send_one(self, topic: str, gray: bool, key: str | None, fields: Fields) -> SendResult:
        self.requests.append(("one", [fields["body"]]))
        if fields["body"] == self.bad:
            raise MessageTooLargeError("too large")
        return result(fields, 0)

    async def send_batch(self, topic: str, gray: bool, key: str | None, messages: list[Fields]) -> list[SendResult]:
        self.requests.append(("batch", [m["body"] for m in messages]))
        if self.batch_error is not None:
            raise self.batch_error
        return [result(m, i) for i, m in enumerate(messages)]


def result(fields: Fields, offset: int) -> SendResult:
    return SendResult(SendStatus.SEND_OK, fields["body"].decode(), MessageQueue("T", "b", 0), offset, False)


def accumulator(sender: FakeSender, max_messages: int = 64, max_bytes: int = 1 << 20) -> MessageAccumulator:
    return MessageAccumulator(sender.send_one, sender.send_batch, max_messages=max_messages, max_bytes=max_bytes)


def fields(i: int) -> Fields:
    return {"topic": "T", "body": f"m{i}".encode()}


def run(body: Any) -> None:
    asyncio.run(asyncio.wait_for(body(), 10))


def test_the_sends_of_one_loop_turn_leave_as_one_batch_and_a_lone_send_alone() -> None:
    sender = FakeSender()

    async def body() -> None:
        acc = accumulator(sender)
        results = await asyncio.gather(*(acc.send(KEY, fields(i), 2) for i in range(3)))
        assert [r.queue_offset for r in results] == [0, 1, 2]
        await acc.send(KEY, fields(9), 2)

    run(body)
    assert sender.requests == [("batch", [b"m0", b"m1", b"m2"]), ("one", [b"m9"])]


def test_appended_messages_leave_at_the_end_of_the_turn_without_waiting_for_more() -> None:
    sender = FakeSender()

    async def body() -> None:
        acc = accumulator(sender)
        futures = [acc.append(KEY, fields(i), 2) for i in range(2)]
        assert sender.requests == []  # nothing before the turn ends
        await asyncio.gather(*futures)
        assert sender.requests == [("batch", [b"m0", b"m1"])]

    run(body)


@pytest.mark.parametrize("limits, expected", [
    ({"max_messages": 2}, [[b"m0", b"m1"], [b"m2", b"m3"], [b"m4"]]),
    ({"max_bytes": 4}, [[b"m0", b"m1"], [b"m2", b"m3"], [b"m4"]]),  # 2 bytes a body: 4 fills a batch
], ids=["messages", "bytes"])
def test_a_full_batch_leaves_at_once(limits: dict[str, int], expected: list[list[bytes]]) -> None:
    sender = FakeSender()

    async def body() -> None:
        acc = accumulator(sender, **limits)
        futures = [acc.append(KEY, fields(i), 2) for i in range(5)]
        await asyncio.gather(*futures)

    run(body)
    assert [bodies for _, bodies in sender.requests] == expected


def test_flush_sends_the_open_batches_and_waits_for_them() -> None:
    sender = FakeSender()

    async def body() -> None:
        acc = accumulator(sender)
        futures = [acc.append(KEY, fields(i), 2) for i in range(3)]
        futures.append(acc.append(("U", True, "k"), fields(3), 2))
        await acc.flush()  # in the same turn: nothing left open, everything answered
        assert all(f.done() and not f.exception() for f in futures)

    run(body)
    assert sorted(sender.requests) == [("batch", [b"m0", b"m1", b"m2"]), ("one", [b"m3"])]


def test_a_batch_that_failed_after_its_retries_fails_each_of_its_futures() -> None:
    error = RequestTimeoutError("no answer")
    sender = FakeSender(batch_error=error)

    async def body() -> None:
        acc = accumulator(sender)
        futures = [acc.append(KEY, fields(i), 2) for i in range(3)]
        outcomes = await asyncio.gather(*futures, return_exceptions=True)
        assert outcomes == [error, error, error]

    run(body)
    assert len(sender.requests) == 1  # not resent one by one: the retries were the producer's


def test_a_refused_batch_is_resent_one_by_one_so_each_sender_gets_its_own_answer() -> None:
    sender = FakeSender(batch_error=MessageTooLargeError("batch too large"), bad=b"m1")

    async def body() -> None:
        acc = accumulator(sender)
        futures = [acc.append(KEY, fields(i), 2) for i in range(3)]
        outcomes = await asyncio.gather(*futures, return_exceptions=True)
        assert isinstance(outcomes[1], MessageTooLargeError)
        assert [o.msg_id for o in (outcomes[0], outcomes[2])] == ["m0", "m2"]  # type: ignore[union-attr]

    run(body)
    assert [kind for kind, _ in sender.requests] == ["batch", "one", "one", "one"]
