"""A consumer's background tasks never die unobserved, retries back off, and repeated warnings do not flood."""

from __future__ import annotations

import asyncio
import doctest
import logging

import pytest

from graymq.protocol import graymq_pb2 as pb
from graymq.protocol import retry
from graymq.protocol.errors import ConfigError, ConnectionClosedError, GrayMQError, NoPermissionError, error_from_code
from graymq.protocol.retry import Backoff, ThrottledLog
from graymq.protocol.supervisor import Supervisor

pytestmark = pytest.mark.unit


def test_backoff_has_worked_examples():
    assert doctest.testmod(retry).failed == 0


def test_backoff_grows_with_jitter_and_never_passes_its_cap():
    backoff = Backoff(0.1, 3.0)
    delays = [backoff.next() for _ in range(100)]
    assert 0.05 <= delays[0] <= 0.1 and 0.1 <= delays[1] <= 0.2
    assert all(1.5 <= d <= 3.0 for d in delays[10:])
    assert len(set(delays[10:])) > 1, "jittered"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_repeated_warning_is_logged_once_per_interval_with_the_count_held_back(caplog):
    clock = Clock()
    throttled = ThrottledLog(logging.getLogger("graymq.test"), interval_s=30, clock=clock)
    with caplog.at_level(logging.WARNING, logger="graymq"):
        for _ in range(50):  # a loop retrying every 100 ms for 5 s
            throttled.warning("pull q0", "pull of %s failed", "q0")
            clock.now += 0.1
        throttled.warning("pull q1", "pull of %s failed", "q1")  # another failure is not held back
        clock.now = 31
        throttled.warning("pull q0", "pull of %s failed", "q0")
        throttled.forget("pull q1")
        throttled.warning("pull q1", "pull of %s failed", "q1")
    assert [r.getMessage() for r in caplog.records] == [
        "pull of q0 failed", "pull of q1 failed", "pull of q0 failed (repeated 49 more times since last logged)",
        "pull of q1 failed",
    ]


def supervise(on_fatal=None) -> Supervisor:
    supervisor = Supervisor("consumer c1", on_fatal or (lambda exc, where: None))
    supervisor.RESTART = (0.01, 0.02)
    return supervisor


def test_an_unexpected_exception_in_a_loop_is_logged_at_error_and_the_loop_restarted(caplog):
    runs: list[int] = []
    restarts: list[int] = []

    async def loop() -> None:
        runs.append(1)
        if len(runs) == 1:
            raise KeyError("a bug")

    async def scenario() -> None:
        supervisor = supervise()
        task = supervisor.spawn("rebalance", loop, on_restart=lambda: restarts.append(1))
        await asyncio.wait_for(task, 5)

    with caplog.at_level(logging.ERROR, logger="graymq"):
        asyncio.run(scenario())
    assert len(runs) == 2 and restarts == [1]
    (logged,) = caplog.records
    assert logged.levelno == logging.ERROR and logged.exc_info is not None
    assert "consumer c1: rebalance failed unexpectedly (KeyError: 'a bug'); restarting it in" in logged.getMessage()


def test_a_permanent_error_ends_the_owner_instead_of_restarting(caplog):
    fatal: list[tuple[GrayMQError, str]] = []
    runs: list[int] = []

    async def loop() -> None:
        runs.append(1)
        raise NoPermissionError("topic T is not readable")

    async def scenario() -> None:
        supervisor = supervise(lambda exc, where: fatal.append((exc, where)))
        await asyncio.wait_for(supervisor.spawn("pull T:0", loop), 5)

    with caplog.at_level(logging.ERROR, logger="graymq"):
        asyncio.run(scenario())
    assert runs == [1] and [(type(e), w) for e, w in fatal] == [(NoPermissionError, "pull T:0")]
    assert caplog.records == [], "the owner logs the failure, once"


def test_a_retriable_error_escaping_a_loop_is_restarted_not_fatal():
    fatal: list[object] = []
    runs: list[int] = []

    async def loop() -> None:
        runs.append(1)
        if len(runs) < 3:
            raise ConnectionClosedError("broker gone")

    async def scenario() -> None:
        supervisor = supervise(lambda exc, where: fatal.append(exc))
        await asyncio.wait_for(supervisor.spawn("persist", loop), 5)

    asyncio.run(scenario())
    assert len(runs) == 3 and fatal == []


def test_a_watched_task_that_ends_with_an_exception_is_logged_at_error(caplog):
    async def one_shot() -> None:
        raise RuntimeError("lost")

    async def scenario() -> None:
        supervisor = Supervisor("consumer c1", lambda exc, where: None)
        task = asyncio.get_running_loop().create_task(one_shot(), name="drain")
        supervisor.watch(task)
        await asyncio.gather(task, return_exceptions=True)
        await asyncio.sleep(0)  # done callbacks run on the next turn
        assert not supervisor.tasks

    with caplog.at_level(logging.ERROR, logger="graymq"):
        asyncio.run(scenario())
    (logged,) = caplog.records
    assert "consumer c1: task drain ended with an unexpected error" in logged.getMessage()
    assert logged.exc_info is not None and isinstance(logged.exc_info[1], RuntimeError)


def test_cancelling_supervised_loops_is_quiet(caplog):
    async def forever() -> None:
        await asyncio.Event().wait()

    async def scenario() -> None:
        supervisor = Supervisor("consumer c1", lambda exc, where: None)
        tasks = [supervisor.spawn("heartbeat", forever), supervisor.spawn("persist", forever)]
        await asyncio.sleep(0)
        await supervisor.cancel(tasks)
        assert all(t.cancelled() for t in tasks)

    with caplog.at_level(logging.DEBUG, logger="graymq"):
        asyncio.run(scenario())
    assert caplog.records == []


def test_only_errors_an_operator_must_fix_are_permanent():
    assert {code for code in pb.ErrorCode.values() if code and error_from_code(code, "x").permanent} == {
        pb.BAD_REQUEST, pb.NO_PERMISSION, pb.UNAUTHORIZED, pb.FORBIDDEN}
    assert ConfigError("x").permanent and not GrayMQError("internal").permanent
    assert not any(error_from_code(code, "x").retriable and error_from_code(code, "x").permanent
                   for code in pb.ErrorCode.values())
