"""Heavy work runs a few at a time in order of arrival; a heartbeat that waited longer than its bound is turned
away, and work whose caller hung up meanwhile is skipped."""

from __future__ import annotations

import asyncio
import threading

import pytest

from graymq.nameserver.admission import Admission, Busy
from graymq.nameserver.errors import CallerGone

pytestmark = pytest.mark.unit


def test_heartbeats_run_a_few_at_a_time_and_one_kept_waiting_too_long_gets_busy_without_its_work() -> None:
    async def scenario() -> None:
        admission = Admission(concurrency=1, queue_s=0.05)
        release, ran = threading.Event(), []

        def slow() -> str:
            release.wait(10)
            ran.append("slow")
            return "slow"

        def quick(name: str) -> str:
            ran.append(name)
            return name

        first = asyncio.ensure_future(admission.run(slow))
        await asyncio.sleep(0.01)
        waiting = asyncio.ensure_future(admission.run(lambda: quick("late"), shed=True))
        await asyncio.sleep(0.2)  # it waits past its bound behind the slow one
        assert not waiting.done()
        release.set()
        assert await first == "slow"
        with pytest.raises(Busy) as busy:
            await waiting
        assert busy.value.status_code == 503 and busy.value.headers == {"Retry-After": "1"}
        assert "waited" in str(busy.value.detail)
        assert await admission.run(lambda: quick("next")) == "next"  # nothing ahead: it runs
        assert ran == ["slow", "next"]  # the turned-away one's work never ran

    asyncio.run(scenario())


def test_requests_take_their_turns_in_order_of_arrival() -> None:
    async def scenario() -> None:
        admission = Admission(concurrency=1, queue_s=30.0)
        release, order = threading.Event(), []

        def step(name: str) -> None:
            if name == "first":
                release.wait(10)
            order.append(name)

        tasks = []
        for name in ("first", "second", "third", "fourth"):
            tasks.append(asyncio.ensure_future(admission.run(lambda name=name: step(name), shed=True)))  # type: ignore[misc]
            await asyncio.sleep(0.01)
        release.set()
        await asyncio.gather(*tasks)
        assert order == ["first", "second", "third", "fourth"]

    asyncio.run(scenario())


class Caller:
    """A request as ``Admission`` sees it: whether its client disconnected."""

    def __init__(self, gone: bool) -> None:
        self.gone = gone

    async def is_disconnected(self) -> bool:
        return self.gone


def test_work_whose_caller_hung_up_while_it_waited_is_skipped_and_a_watch_read_is_not_turned_away() -> None:
    async def scenario() -> None:
        admission = Admission(concurrency=1, queue_s=0.01)
        release, ran = threading.Event(), []

        def slow() -> None:
            release.wait(10)

        first = asyncio.ensure_future(admission.run(slow))
        await asyncio.sleep(0.01)
        gone = asyncio.ensure_future(admission.run(lambda: ran.append("gone"), Caller(gone=True)))  # type: ignore[arg-type]
        read = asyncio.ensure_future(admission.run(lambda: ran.append("read"), Caller(gone=False)))  # type: ignore[arg-type]
        await asyncio.sleep(0.1)
        release.set()
        await first
        with pytest.raises(CallerGone):
            await gone
        await read  # waited past queue_s, but only heartbeats are shed
        assert ran == ["read"]

    asyncio.run(scenario())
