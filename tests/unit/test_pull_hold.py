"""Long polling: a held pull is answered once, on its queue's append or at its timeout, and leaves nothing behind."""

from __future__ import annotations

import asyncio

import pytest

from graymq.broker_ext.processors.pull_hold import PullRequestHoldService

pytestmark = pytest.mark.unit


def run(coro_fn):  # a hang guard, not a speed check
    return asyncio.run(asyncio.wait_for(coro_fn(), 10))


def held(holds: PullRequestHoldService, topic: str, queue_id: int, timeout_s: float) -> asyncio.Future[bool]:
    """The outcome of one held pull as a future (True: woken by an append, False: timed out)."""
    outcome: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
    calls = []

    def on_done(woken: bool) -> None:
        calls.append(woken)
        assert len(calls) == 1, "a held pull is answered once"
        outcome.set_result(woken)

    holds.hold(topic, queue_id, timeout_s, on_done)
    return outcome


def test_a_held_pull_is_answered_by_an_append_to_its_queue_only():
    async def scenario():
        holds = PullRequestHoldService()
        mine, other = held(holds, "T", 1, 30), held(holds, "T", 2, 30)
        assert holds.waiting == 2
        holds.notify("T", 1)
        holds.notify("T", 1)  # a second append: nothing left to wake
        holds.notify("U", 1)
        assert mine.result() is True  # answered inside the append, no loop turn needed
        assert not other.done() and holds.waiting == 1
        holds.wake_all()
        assert other.result() is True
        assert holds.waiting == 0

    run(scenario)


def test_a_held_pull_times_out_and_leaves_nothing_behind():
    async def scenario():
        holds = PullRequestHoldService()
        assert await held(holds, "T", 0, 0.01) is False
        assert holds.waiting == 0 and not holds._held
        holds.notify("T", 0)  # no late second answer (the callback asserts it)

    run(scenario)


def test_timeouts_never_end_a_pull_early_and_a_shorter_one_is_not_held_up_by_a_longer_one():
    async def scenario():
        holds = PullRequestHoldService()
        loop = asyncio.get_running_loop()
        started = loop.time()
        long = held(holds, "T", 0, 30)
        woken = held(holds, "T", 1, 0.02)
        holds.notify("T", 1)  # its deadline entry stays behind and must not disturb the others
        short = [held(holds, "T", 2, timeout) for timeout in (0.05, 0.03, 0.03)]
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
        return await held(holds, "T", 0, 0.01)

    assert run(time_out) is False
    assert run(time_out) is False


def test_woken_pulls_let_go_of_their_requests_at_once_and_their_heap_entries_soon():
    """A busy queue wakes every pull long before its timeout: what each one held must not pile up meanwhile."""
    import gc
    import weakref

    class Request:  # stands for what a held pull's callback holds: the request, its connection, the answer
        pass

    async def scenario():
        holds = PullRequestHoldService()
        alive: list[weakref.ref[Request]] = []
        outcomes = []
        for _ in range(5_000):
            request = Request()
            alive.append(weakref.ref(request))
            outcomes.append(asyncio.get_running_loop().create_future())
            holds.hold("T", 0, 30, lambda woken, r=request, f=outcomes[-1]: f.set_result((woken, r)))
            holds.notify("T", 0)
        assert all(f.result()[0] is True for f in outcomes)
        outcomes.clear()
        del request
        gc.collect()
        assert sum(ref() is not None for ref in alive) == 0
        assert len(holds._deadlines) <= 2 * 1024 + 1  # rebuilt without the woken entries
        late = held(holds, "T", 1, 0.05)  # timeouts still work after the rebuilds
        assert await late is False and holds.waiting == 0

    run(scenario)
