"""Heartbeat work runs a few at a time in order of arrival; what waited longer than its bound is turned away."""

from __future__ import annotations

import asyncio
import threading

import pytest

from graymq.nameserver.admission import Busy, HeartbeatAdmission

pytestmark = pytest.mark.unit


def test_heartbeats_run_a_few_at_a_time_and_one_kept_waiting_too_long_gets_busy_without_its_work() -> None:
    async def scenario() -> None:
        admission = HeartbeatAdmission(concurrency=1, queue_s=0.05)
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
        waiting = asyncio.ensure_future(admission.run(lambda: quick("late")))
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
        admission = HeartbeatAdmission(concurrency=1, queue_s=30.0)
        release, order = threading.Event(), []

        def step(name: str) -> None:
            if name == "first":
                release.wait(10)
            order.append(name)

        tasks = []
        for name in ("first", "second", "third", "fourth"):
            tasks.append(asyncio.ensure_future(admission.run(lambda name=name: step(name))))  # type: ignore[misc]
            await asyncio.sleep(0.01)
        release.set()
        await asyncio.gather(*tasks)
        assert order == ["first", "second", "third", "fourth"]

    asyncio.run(scenario())
