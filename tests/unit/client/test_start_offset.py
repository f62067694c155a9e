"""Where a consumer starts never-committed queues: the rule, and that it is decided before any start is committed."""

from __future__ import annotations

import asyncio
import doctest
from collections.abc import Iterable

import pytest

from graymq.client.consumer import start_offset
from graymq.client.consumer.start_offset import ConsumeFrom, QueueToStart, StartOffsets
from graymq.client.message import MessageQueue
from graymq.protocol.errors import GrayMQError

pytestmark = pytest.mark.unit
GROUP = "G"
MIN, MAX, AT_TIME = 10, 90, 50


class FakeBrokers:
    async def min_offset(self, address: str, topic: str, queue_id: int) -> int:
        return MIN

    async def max_offset(self, address: str, topic: str, queue_id: int) -> int:
        return MAX

    async def search_offset(self, address: str, topic: str, queue_id: int, timestamp_ms: int) -> int:
        return AT_TIME


class FakeOffsetStore:
    """Committed offsets in a dict; records the order of calls."""

    def __init__(self, committed: dict[MessageQueue, int], group_committed: bool | GrayMQError) -> None:
        self.committed = dict(committed)
        self.answer = group_committed
        self.calls: list[str] = []

    async def read(self, mq: MessageQueue, address: str) -> int:
        return self.committed.get(mq, -1)

    async def write(self, mq: MessageQueue, address: str, offset: int) -> None:
        self.calls.append(f"write {mq.topic}:{mq.queue_id}")
        self.committed[mq] = offset

    async def flush(self) -> None:
        return None

    async def group_committed(self, addresses: Iterable[str]) -> bool:
        self.calls.append("group_committed")
        if isinstance(self.answer, GrayMQError):
            raise self.answer
        return self.answer


GRAY = MessageQueue("T", "b", 0)
NORMAL = MessageQueue("T", "b", 1)
RETRY_GRAY = MessageQueue(f"%RETRY%{GROUP}", "b", 0)
QUEUES = [QueueToStart(GRAY, "x", True), QueueToStart(NORMAL, "x", False), QueueToStart(RETRY_GRAY, "x", True)]


def plan(store: FakeOffsetStore, consume_from: ConsumeFrom = "last") -> dict[MessageQueue, int | GrayMQError]:
    starts = StartOffsets(FakeBrokers(), store, GROUP, consume_from, timestamp_ms=1)  # type: ignore[arg-type]
    return asyncio.run(starts.plan(QUEUES, ["x"]))


def test_the_rule_has_worked_examples() -> None:
    assert doctest.testmod(start_offset).failed == 0


def test_a_new_group_starts_gray_and_normal_queues_at_consume_from_and_retries_at_the_first() -> None:
    store = FakeOffsetStore({}, group_committed=False)
    assert plan(store) == {GRAY: MAX, NORMAL: MAX, RETRY_GRAY: MIN}
    assert plan(FakeOffsetStore({}, group_committed=False), "timestamp") == {GRAY: AT_TIME, NORMAL: AT_TIME,
                                                                             RETRY_GRAY: MIN}


def test_a_group_with_commits_starts_never_committed_gray_queues_at_the_first_message() -> None:
    assert plan(FakeOffsetStore({}, group_committed=True)) == {GRAY: MIN, NORMAL: MAX, RETRY_GRAY: MIN}


def test_the_group_history_is_read_before_any_start_is_committed_and_every_start_is_committed() -> None:
    store = FakeOffsetStore({}, group_committed=False)
    plan(store)
    assert store.calls[0] == "group_committed" and store.calls.count("group_committed") == 1
    assert sorted(store.calls[1:]) == ["write %RETRY%G:0", "write T:0", "write T:1"]


def test_committed_offsets_are_kept_and_the_history_is_asked_only_when_a_gray_queue_needs_it() -> None:
    store = FakeOffsetStore({GRAY: 42}, group_committed=True)
    assert plan(store) == {GRAY: 42, NORMAL: MAX, RETRY_GRAY: MIN}
    assert "group_committed" not in store.calls
    first = FakeOffsetStore({}, group_committed=True)
    assert plan(first, "first") == {GRAY: MIN, NORMAL: MIN, RETRY_GRAY: MIN}
    assert "group_committed" not in first.calls


def test_an_unknown_history_holds_back_only_the_gray_queues_that_depend_on_it() -> None:
    down = GrayMQError("broker b unreachable")
    store = FakeOffsetStore({}, group_committed=down)
    starts = plan(store)
    assert starts[GRAY] is down and (starts[NORMAL], starts[RETRY_GRAY]) == (MAX, MIN)
    assert "write T:0" not in store.calls
