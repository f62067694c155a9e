"""A push consumer's flips: GrayFlip's decisions (pure), and FlipRunner doing them on fake parts — what it
releases, reports and announces, and when."""

from __future__ import annotations

import asyncio
import doctest
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

import pytest

from graymq.client.consumer.flip_runner import FlipRunner
from graymq.client.consumer.runtime import ConsumerRuntime
from graymq.core import gray_flip as gray_flip_module
from graymq.core.gray_flip import FlipAction, GrayFlip
from graymq.core.group_gray import GroupGray
from graymq.protocol.errors import DrainTimeoutError, GrayMQError
from graymq.protocol.membership import ClientState
from graymq.protocol.supervisor import Supervisor
from tests.support.records import heartbeat_answer

pytestmark = pytest.mark.unit


def run(test: Callable[[], Awaitable[None]]) -> Callable[[], None]:
    @functools.wraps(test)
    def sync() -> None:
        asyncio.run(asyncio.wait_for(test(), 30))
    return sync


def test_docstring_example() -> None:
    assert doctest.testmod(gray_flip_module).failed == 0


# -- GrayFlip alone: observations in, actions out ------------------------------------------------
def following(gray: bool, timeout_s: float = 60.0) -> GrayFlip:
    flip = GrayFlip(gray, drain_timeout_s=timeout_s, drain_poll_s=0.01)
    flip.follow_changes()
    return flip


def test_before_following_the_desired_flag_is_adopted_and_nothing_is_done() -> None:
    flip = GrayFlip(False, drain_timeout_s=60, drain_poll_s=0.01)
    assert flip.follow(True, draining=False) is FlipAction.NONE
    assert flip.gray_state.state is ClientState.GRAY


def test_desired_gray_on_a_normal_client_becomes_gray_once_its_queues_are_released() -> None:
    flip = following(False)
    assert flip.follow(True, draining=False) is FlipAction.BECOME_GRAY
    assert flip.gray_state.state is ClientState.NORMAL  # still normal while it releases its queues
    flip.became_gray()
    assert flip.gray_state.state is ClientState.GRAY


def test_desired_normal_starts_a_drain_and_desired_gray_during_it_cancels_it() -> None:
    flip = following(True)
    assert flip.follow(False, draining=False) is FlipAction.START_DRAIN
    assert flip.begin_drain(None, 0.0, gray_switch=True) is FlipAction.CHECK_BACKLOG
    assert flip.gray_state.state is ClientState.DRAINING
    assert flip.follow(False, draining=True) is FlipAction.NONE
    assert flip.follow(True, draining=True) is FlipAction.CANCEL_DRAIN
    assert flip.gray_state.state is ClientState.GRAY


def test_a_drain_waits_for_a_zero_backlog_then_reports_normal_then_hands_over() -> None:
    flip = following(True)
    flip.begin_drain(None, 0.0, gray_switch=True)
    assert [flip.backlog_read(b, 1.0) for b in (3, None)] == [FlipAction.WAIT, FlipAction.WAIT]
    assert flip.backlog_read(0, 2.0) is FlipAction.REPORT_NORMAL
    assert flip.gray_state.state is ClientState.NORMAL
    assert flip.report_heard(True, 2.0) is FlipAction.HAND_OVER


def test_a_flip_no_name_server_heard_drains_on_and_the_deadline_still_holds() -> None:
    flip = following(True, timeout_s=10)
    flip.begin_drain(None, 0.0, gray_switch=True)
    flip.backlog_read(0, 1.0)
    assert flip.report_heard(False, 1.0) is FlipAction.WAIT
    assert flip.gray_state.state is ClientState.DRAINING
    assert flip.report_heard(False, 11.0) is FlipAction.TIMED_OUT
    assert flip.gray_state.state is ClientState.GRAY
    assert flip.last_drain_error.startswith("drain timed out with 0 gray messages left")


def test_a_drain_past_its_deadline_stays_gray_and_says_how_much_was_left() -> None:
    flip = following(True)
    flip.begin_drain(5.0, 100.0, gray_switch=True)
    assert flip.backlog_read(4, 104.0) is FlipAction.WAIT
    assert flip.backlog_read(4, 106.0) is FlipAction.TIMED_OUT
    assert flip.gray_state.state is ClientState.GRAY
    assert "4 gray messages left" in flip.last_drain_error
    flip.begin_drain(5.0, 200.0, gray_switch=True)
    assert flip.backlog_read(None, 206.0) is FlipAction.TIMED_OUT
    assert "an unknown number of gray messages left" in flip.last_drain_error


def test_with_the_gray_switch_off_a_flip_to_normal_reads_no_backlog() -> None:
    flip = following(True)
    assert flip.begin_drain(None, 0.0, gray_switch=False) is FlipAction.REPORT_NORMAL
    assert flip.gray_state.state is ClientState.NORMAL
    assert flip.report_heard(False, 0.0) is FlipAction.NONE  # reported again at the next desired normal


def test_a_normal_client_has_nothing_to_drain() -> None:
    assert following(False).begin_drain(None, 0.0, gray_switch=True) is FlipAction.NONE


# -- FlipRunner on fake parts ------------------------------------------------------------------
class FakeMembership:
    """Records the client's changes; ``beat`` answers from ``heard`` (False: no name server answered)."""

    def __init__(self, declared_gray: bool | None, heard: list[bool] | None = None) -> None:
        self.declared_gray = declared_gray
        self.heard = heard or []
        self.changes = 0
        self.beats: list[bool] = []
        self.answer_epoch: int | None = None  # no answer acted on: every change is the client's own

    def changed(self, after: int | None = None) -> None:
        self.changes += 1

    def poke(self) -> None:
        pass

    async def beat(self) -> dict[str, Any] | None:
        heard = self.heard.pop(0) if self.heard else True
        self.beats.append(heard)
        return {} if heard else None


class FakeParts:
    """The rebalancer, fetcher and broker heartbeats of a flip, as a log of calls, and the gray backlog."""

    def __init__(self, flip: GrayFlip, backlogs: list[int | None]) -> None:
        self.flip = flip
        self.backlogs = backlogs
        self.calls: list[str] = []
        self.backlog_read = asyncio.Event()

    async def release_queues(self, keep_adopted: bool) -> None:
        self.calls.append("release gray queues" if keep_adopted else "release every queue")

    async def persist_offsets(self) -> None:
        self.calls.append("persist")

    async def beat(self) -> None:
        self.calls.append(f"announce {self.flip.gray_state.state}")

    async def gray_backlog(self) -> int | None:
        self.backlog_read.set()
        if len(self.backlogs) > 1:
            return self.backlogs.pop(0)
        await asyncio.sleep(0.001)
        return self.backlogs[0]


def fatal(exc: GrayMQError, where: str) -> None:
    raise AssertionError(f"{where}: {exc}")


class Consumer:
    """A FlipRunner wired to fakes: nothing here opens a socket."""

    def __init__(self, gray: bool, backlogs: list[int | None], *, gray_switch: bool = True,
                 heard: list[bool] | None = None) -> None:
        self.flip = GrayFlip(gray, drain_timeout_s=60, drain_poll_s=0.001)
        self.flip.follow_changes()
        self.parts = FakeParts(self.flip, backlogs)
        self.membership = FakeMembership(gray, heard)
        self.runtime = ConsumerRuntime("G", "c1", False, cast(Any, None), cast(Any, None), cast(Any, None),
                                       self.flip, Supervisor("c1", fatal), fatal,
                                       group_gray=GroupGray(switch=gray_switch))
        parts: Any = self.parts
        self.runner = FlipRunner(self.runtime, cast(Any, self.membership), parts, parts, parts, orphan_policy=None,
                                 slots=parts)
        self.runner.gray_backlog = self.parts.gray_backlog  # type: ignore[method-assign]

    async def settled(self, state: ClientState) -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.flip.gray_state.state is state and self.runner._drain_task is None:
                return
            await asyncio.sleep(0.001)
        raise AssertionError(f"still {self.flip.gray_state.state}, expected {state}")


@run
async def test_normal_to_gray_releases_every_queue_then_announces_gray() -> None:
    consumer = Consumer(gray=False, backlogs=[5])
    await consumer.runner.follow(True)
    assert consumer.parts.calls == ["release every queue", "announce GRAY"]
    assert consumer.runtime.rebalance_now.is_set()


@run
async def test_gray_to_normal_drains_to_a_zero_backlog_and_reports_normal_before_the_brokers() -> None:
    consumer = Consumer(gray=True, backlogs=[3, 1, 0])
    await consumer.runner.follow(False)
    await consumer.settled(ClientState.NORMAL)
    assert consumer.parts.calls == ["persist"] * 3 + ["release gray queues", "announce NORMAL"]
    assert consumer.membership.beats == [True]


@run
async def test_a_flip_no_name_server_heard_keeps_draining_and_reports_again() -> None:
    consumer = Consumer(gray=True, backlogs=[0], heard=[False, True])
    await consumer.runner.follow(False)
    await consumer.settled(ClientState.NORMAL)
    assert consumer.membership.beats == [False, True]
    assert consumer.parts.calls == ["persist", "persist", "release gray queues", "announce NORMAL"]


@run
async def test_desired_gray_again_cancels_the_drain_and_stays_gray() -> None:
    consumer = Consumer(gray=True, backlogs=[7])
    await consumer.runner.follow(False)
    await asyncio.wait_for(consumer.parts.backlog_read.wait(), 5)
    assert consumer.flip.gray_state.state is ClientState.DRAINING
    task = consumer.runner._drain_task
    await consumer.runner.follow(True)
    assert consumer.flip.gray_state.state is ClientState.GRAY and consumer.runner._drain_task is None
    assert task is not None
    await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled()
    assert "release gray queues" not in consumer.parts.calls


@run
async def test_a_drain_that_times_out_stays_gray_says_why_and_restores_the_declaration() -> None:
    consumer = Consumer(gray=True, backlogs=[4])
    with pytest.raises(DrainTimeoutError, match="4 gray messages left"):
        await consumer.runner.drain_and_flip(timeout_s=0.01)
    assert consumer.flip.gray_state.state is ClientState.GRAY
    assert consumer.membership.declared_gray is True
    consumer.parts.backlogs[:] = [0]
    await consumer.runner.drain_and_flip(timeout_s=5)
    assert consumer.flip.gray_state.state is ClientState.NORMAL and consumer.membership.declared_gray is False


@run
async def test_with_the_gray_switch_off_gray_to_normal_flips_without_draining() -> None:
    consumer = Consumer(gray=True, backlogs=[9], gray_switch=False)
    await consumer.runner.follow(False)
    await consumer.settled(ClientState.NORMAL)
    assert consumer.parts.calls == ["release gray queues", "announce NORMAL"]


@run
async def test_a_name_server_answer_changing_the_switch_heartbeats_the_brokers_and_rebalances() -> None:
    consumer = Consumer(gray=False, backlogs=[0])
    await consumer.runner.on_update(heartbeat_answer(desired_gray=False, gray_switch=True, gray_weight=25))
    assert consumer.runtime.group_gray == GroupGray(switch=True, weight=25)
    assert consumer.parts.calls == ["announce NORMAL"] and consumer.runtime.rebalance_now.is_set()
