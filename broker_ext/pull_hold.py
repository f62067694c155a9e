"""Long polling: pulls that found nothing wait here until a message arrives on their queue or time runs out."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time

# After the expiry timer fires it is not re-armed sooner than this, so a broker holding many pulls handles
# their timeouts in a few timer callbacks a second; a held pull may end this much late (never early).
TIMER_RESOLUTION_S = 0.01
# asyncio runs a timer up to the monotonic clock's resolution before its time (BaseEventLoop._run_once).
_CLOCK_RESOLUTION_S = time.get_clock_info("monotonic").resolution


class PullRequestHoldService:
    """Waiters keyed by (topic, queue_id); ``notify`` wakes them all after an append.

    Per held pull: a future and a heap entry. Timeouts share one timer armed for the earliest deadline
    (asyncio's per-call timers are Python-compared heap entries, cancelled ones lingering: that cost
    was paid on every pull). ``notify`` takes the queue's waiters out of the table, so the appends
    that follow find nothing to wake; the heap entry of a woken pull is dropped at its deadline.
    """

    def __init__(self) -> None:
        self._waiters: dict[tuple[str, int], set[asyncio.Future[bool]]] = {}
        self._deadlines: list[tuple[float, int, asyncio.Future[bool]]] = []
        self._serials = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        self._loop: asyncio.AbstractEventLoop | None = None

    async def wait(self, topic: str, queue_id: int, timeout_s: float) -> bool:
        """Wait for a message on the queue; returns False on timeout."""
        key = (topic, queue_id)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        waiters = self._waiters.get(key)
        if waiters is None:
            waiters = self._waiters[key] = set()
        waiters.add(future)
        deadline = loop.time() + timeout_s
        heapq.heappush(self._deadlines, (deadline, next(self._serials), future))
        if deadline < self._timer_at or loop is not self._loop:
            self._arm(loop, deadline)
        try:
            return await future
        finally:
            waiters.discard(future)
            if not waiters and self._waiters.get(key) is waiters:
                del self._waiters[key]

    def notify(self, topic: str, queue_id: int) -> None:
        waiters = self._waiters.pop((topic, queue_id), None)
        if waiters:
            for future in waiters:
                _resolve(future, True)

    def wake_all(self) -> None:
        """Release every waiter (shutdown)."""
        table, self._waiters = self._waiters, {}
        for waiters in table.values():
            for future in waiters:
                _resolve(future, True)

    @property
    def waiting(self) -> int:
        return sum(len(w) for w in self._waiters.values())

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._loop, self._timer_at = loop, when
        self._timer = loop.call_at(when, self._expire)

    def _expire(self) -> None:
        """Time out the pulls whose deadline has come; re-arm for the next one."""
        loop = self._loop
        assert loop is not None
        self._timer, self._timer_at = None, math.inf
        now = loop.time()
        due = now + _CLOCK_RESOLUTION_S
        deadlines = self._deadlines
        while deadlines and deadlines[0][0] <= due:
            _resolve(heapq.heappop(deadlines)[2], False)
        if deadlines:
            self._arm(loop, max(deadlines[0][0], now + TIMER_RESOLUTION_S))


def _resolve(future: asyncio.Future[bool], woken: bool) -> None:
    if not future.done():
        future.set_result(woken)
