"""Long polling: a held pull wakes on its queue's append, times out otherwise, and leaves nothing behind."""

from __future__ import annotations

import asyncio

import pytest

from broker_ext.pull_hold import PullRequestHoldService

pytestmark = pytest.mark.unit


def run(coro_fn):  # a hang guard, not a speed check
    return asyncio.run(asyncio.wait_for(coro_fn(), 10))


def test_a_held_pull_wakes_on_an_append_to_its_queue_only():
    async def scenario():
        holds = PullRequestHoldService()
        mine = asyncio.create_task(holds.wait("T", 1, 30))
        other = asyncio.create_task(holds.wait("T", 2, 30))
        await asyncio.sleep(0)
        assert holds.waiting == 2
        holds.notify("T", 1)
        holds.notify("T", 1)  # a second append before the waiter ran
        holds.notify("U", 1)
        assert await mine is True
        assert not other.done() and holds.waiting == 1
        holds.wake_all()
        assert await other is True
        assert holds.waiting == 0 and not holds._waiters

    run(scenario)


def test_a_held_pull_times_out_and_cleans_up():
    async def scenario():
        holds = PullRequestHoldService()
        assert await holds.wait("T", 0, 0.01) is False
        assert holds.waiting == 0 and not holds._waiters

    run(scenario)


def test_a_cancelled_pull_leaves_no_waiter_and_a_new_one_still_wakes():
    async def scenario():
        holds = PullRequestHoldService()
        gone = asyncio.create_task(holds.wait("T", 0, 30))
        await asyncio.sleep(0)
        gone.cancel()
        await asyncio.gather(gone, return_exceptions=True)
        assert holds.waiting == 0 and not holds._waiters
        again = asyncio.create_task(holds.wait("T", 0, 30))
        await asyncio.sleep(0)
        holds.notify("T", 0)
        assert await again is True

    run(scenario)


def test_timeouts_never_end_a_pull_early_and_a_shorter_one_is_not_held_up_by_a_longer_one():
    async def scenario():
        holds = PullRequestHoldService()
        loop = asyncio.get_running_loop()
        started = loop.time()
        long = asyncio.create_task(holds.wait("T", 0, 30))
        woken = asyncio.create_task(holds.wait("T", 1, 0.02))
        await asyncio.sleep(0)
        holds.notify("T", 1)  # its deadline entry stays behind and must not disturb the others
        short = [asyncio.create_task(holds.wait("T", 2, timeout)) for timeout in (0.05, 0.03, 0.03)]
        assert await woken is True
        assert await asyncio.gather(*short) == [False, False, False]
        assert loop.time() - started >= 0.05
        assert not long.done() and holds.waiting == 1
        holds.notify("T", 0)
        assert await long is True

    run(scenario)


def test_the_service_keeps_working_on_a_new_event_loop():
    holds = PullRequestHoldService()

    async def time_out():
        return await holds.wait("T", 0, 0.01)

    assert run(time_out) is False
    assert run(time_out) is False
