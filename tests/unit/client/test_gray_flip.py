"""A push consumer's flips (GrayFlip) on a fake consumer: what it releases, reports and announces, and when."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from graymq.client.consumer.gray_flip import GrayFlip
from graymq.protocol.errors import DrainTimeoutError, GrayMQError
from graymq.protocol.membership import ClientState
from graymq.protocol.supervisor import Supervisor

pytestmark = pytest.mark.unit


def run(test: Callable[[], Awaitable[None]]) -> Callable[[], None]:
    @functools.wraps(test)
    def sync() -> None:
        asyncio.run(asyncio.wait_for(test(), 30))
    return sync


class FakeMembership:
    """Records the client's changes; ``beat`` answers from ``heard`` (False: no name server answered)."""

    def __init__(self, declared_gray: bool | None, heard: list[bool] | None = None) -> None:
        self.declared_gray = declared_gray
        self.heard = heard or []
        self.changes = 0
        self.beats: list[Any] = []

    def changed(self) -> None:
        self.changes += 1

    def poke(self) -> None:
        pass

    async def beat(self) -> dict[str, Any] | None:
        heard = self.heard.pop(0) if self.heard else True
        self.beats.append(heard)
        return {} if heard else None


class FakeConsumer:
    """The consumer side of a flip: its queues, backlog and announcements, as a log of calls."""

    client_id, group = "c1", "G"

    def __init__(self, gray: bool, backlogs: list[int | None], *, gray_switch: bool = True,
                 heard: list[bool] | None = None, drain_timeout_s: float = 60.0) -> None:
        self.gray_switch = gray_switch
        self.backlogs = backlogs
        self.membership: Any = FakeMembership(gray, heard)
        self.calls: list[str] = []
        self.backlog_read = asyncio.Event()
        self.flip = GrayFlip(self, gray, Supervisor("c1", self._fatal), drain_timeout_s=drain_timeout_s,
                             drain_poll_s=0.001)

    def _fatal(self, exc: GrayMQError, where: str) -> None:
        raise AssertionError(f"{where}: {exc}")

    async def gray_backlog(self) -> int | None:
        self.backlog_read.set()
        if len(self.backlogs) > 1:
            return self.backlogs.pop(0)
        await asyncio.sleep(0.001)
        return self.backlogs[0]

    async def _persist_offsets(self) -> None:
        self.calls.append("persist")

    async def _release_queues(self, keep_adopted: bool) -> None:
        self.calls.append("release gray queues" if keep_adopted else "release every queue")

    async def _announce(self) -> None:
        self.calls.append(f"announce {self.flip.gray_state.state}")


async def settled(consumer: FakeConsumer, state: ClientState) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if consumer.flip.gray_state.state is state and consumer.flip._drain_task is None:
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"still {consumer.flip.gray_state.state}, expected {state}")


@run
async def test_before_consuming_the_desired_flag_is_taken_without_a_flip() -> None:
    consumer = FakeConsumer(gray=False, backlogs=[5])
    await consumer.flip.follow(True)
    assert consumer.flip.gray_state.state is ClientState.GRAY and consumer.calls == []


@run
async def test_normal_to_gray_releases_every_queue_then_announces_gray() -> None:
    consumer = FakeConsumer(gray=False, backlogs=[5])
    consumer.flip.follow_changes()
    await consumer.flip.follow(True)
    assert consumer.calls == ["release every queue", "announce GRAY"]


@run
async def test_gray_to_normal_drains_to_a_zero_backlog_and_reports_normal_before_the_brokers() -> None:
    consumer = FakeConsumer(gray=True, backlogs=[3, 1, 0])
    consumer.flip.follow_changes()
    await consumer.flip.follow(False)
    await settled(consumer, ClientState.NORMAL)
    assert consumer.calls == ["persist"] * 3 + ["release gray queues", "announce NORMAL"]
    assert consumer.membership.beats == [True]


@run
async def test_a_flip_no_name_server_heard_keeps_draining_and_reports_again() -> None:
    consumer = FakeConsumer(gray=True, backlogs=[0], heard=[False, True])
    consumer.flip.follow_changes()
    await consumer.flip.follow(False)
    await settled(consumer, ClientState.NORMAL)
    assert consumer.membership.beats == [False, True]
    assert consumer.calls == ["persist", "persist", "release gray queues", "announce NORMAL"]


@run
async def test_desired_gray_again_cancels_the_drain_and_stays_gray() -> None:
    consumer = FakeConsumer(gray=True, backlogs=[7])
    consumer.flip.follow_changes()
    await consumer.flip.follow(False)
    await asyncio.wait_for(consumer.backlog_read.wait(), 5)
    assert consumer.flip.gray_state.state is ClientState.DRAINING
    task = consumer.flip._drain_task
    await consumer.flip.follow(True)
    assert consumer.flip.gray_state.state is ClientState.GRAY and consumer.flip._drain_task is None
    assert task is not None
    await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled()
    assert "release gray queues" not in consumer.calls


@run
async def test_a_drain_that_times_out_stays_gray_says_why_and_restores_the_declaration() -> None:
    consumer = FakeConsumer(gray=True, backlogs=[4])
    consumer.flip.follow_changes()
    with pytest.raises(DrainTimeoutError, match="4 gray messages left"):
        await consumer.flip.drain_and_flip(timeout_s=0.01)
    assert consumer.flip.gray_state.state is ClientState.GRAY
    assert "drain timed out with 4 gray messages left" in consumer.flip.last_drain_error
    assert consumer.membership.declared_gray is True
    consumer.backlogs[:] = [0]
    await consumer.flip.drain_and_flip(timeout_s=5)
    assert consumer.flip.gray_state.state is ClientState.NORMAL and consumer.membership.declared_gray is False


@run
async def test_with_the_gray_switch_off_gray_to_normal_flips_without_draining() -> None:
    consumer = FakeConsumer(gray=True, backlogs=[9], gray_switch=False)
    consumer.flip.follow_changes()
    await consumer.flip.follow(False)
    await settled(consumer, ClientState.NORMAL)
    assert consumer.calls == ["release gray queues", "announce NORMAL"]
