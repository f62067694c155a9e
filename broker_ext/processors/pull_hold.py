"""Long polling: pulls that found nothing are held here until a message arrives on their queue or time runs out."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
from collections.abc import Callable

# After the expiry timer fires it is not re-armed sooner than this, so a broker holding many pulls handles
# their timeouts in a few timer callbacks a second; a held pull may end this much late (never early).
TIMER_RESOLUTION_S = 0.01
# asyncio runs a timer up to the monotonic clock's resolution before its time (BaseEventLoop._run_once).
_CLOCK_RESOLUTION_S = time.get_clock_info("monotonic").resolution
COMPACT_AFTER = 1024  # woken entries in the deadline heap before it may be rebuilt without them


class _Hold:
    __slots__ = ("key", "on_done")

    def __init__(self, key: tuple[str, int], on_done: Callable[[bool], None]) -> None:
        self.key = key
        self.on_done: Callable[[bool], None] | None = on_done

    @property
    def done(self) -> bool:
        return self.on_done is None

    def finish(self, woken: bool) -> None:
        """Run the callback once, and let go of it (and of the request it holds) at once."""
        on_done, self.on_done = self.on_done, None
        if on_done is not None:
            on_done(woken)


class PullRequestHoldService:
    """Held pulls keyed by (topic, queue_id), each a callback run once: with True by ``notify`` after an
    append to its queue (or ``wake_all`` at shutdown), with False when its time runs out.

    No task, coroutine or asyncio timer per held pull: timeouts share one timer armed for the earliest
    deadline of a (deadline, serial, hold) heap, and ``notify`` takes the queue's holds out of the table,
    so the appends that follow find nothing to wake. Callbacks must not raise: ``notify`` runs them inside
    the append that woke them. A woken hold's heap entry stays until its deadline, without its callback; when
    woken entries make up most of the heap (every pull of a busy queue is woken within its timeout), the heap
    is rebuilt without them, so it holds about as many entries as pulls are held.
    """

    def __init__(self) -> None:
        self._held: dict[tuple[str, int], list[_Hold]] = {}
        self._deadlines: list[tuple[float, int, _Hold]] = []
        self._serials = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        self._loop: asyncio.AbstractEventLoop | None = None
        self._woken = 0  # entries of the heap whose hold was woken

    def hold(self, topic: str, queue_id: int, timeout_s: float, on_done: Callable[[bool], None]) -> None:
        """Run ``on_done(True)`` when a message arrives on the queue, ``on_done(False)`` after ``timeout_s``."""
        key = (topic, queue_id)
        entry = _Hold(key, on_done)
        held = self._held.get(key)
        if held is None:
            self._held[key] = [entry]
        else:
            held.append(entry)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        heapq.heappush(self._deadlines, (deadline, next(self._serials), entry))
        if deadline < self._timer_at or loop is not self._loop:
            self._arm(loop, deadline)

    def notify(self, topic: str, queue_id: int) -> None:
        held = self._held.pop((topic, queue_id), None)
        if held:
            for entry in held:
                entry.finish(True)
            self._woken += len(held)
            if self._woken > COMPACT_AFTER and self._woken * 2 > len(self._deadlines):
                self._compact()

    def _compact(self) -> None:
        """Drop the entries of woken holds from the deadline heap."""
        self._deadlines = [d for d in self._deadlines if not d[2].done]
        heapq.heapify(self._deadlines)
        self._woken = 0

    def wake_all(self) -> None:
        """Release every held pull (shutdown)."""
        table, self._held = self._held, {}
        for held in table.values():
            for entry in held:
                entry.finish(True)
            self._woken += len(held)

    @property
    def waiting(self) -> int:
        return sum(len(held) for held in self._held.values())

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._loop, self._timer_at = loop, when
        self._timer = loop.call_at(when, self._expire)

    def _expire(self) -> None:
        """Time out the holds whose deadline has come (entries of woken ones are just dropped); re-arm."""
        loop = self._loop
        assert loop is not None
        self._timer, self._timer_at = None, math.inf
        now = loop.time()
        due = now + _CLOCK_RESOLUTION_S
        deadlines = self._deadlines
        while deadlines and deadlines[0][0] <= due:
            entry = heapq.heappop(deadlines)[2]
            if entry.done:
                self._woken -= 1
                continue
            held = self._held.get(entry.key)
            if held is not None:
                held.remove(entry)
                if not held:
                    del self._held[entry.key]
            entry.finish(False)
        if deadlines:
            self._arm(loop, max(deadlines[0][0], now + TIMER_RESOLUTION_S))
