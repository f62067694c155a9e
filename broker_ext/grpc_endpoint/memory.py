"""Memory handed back to the system after a wave of gRPC streams has closed.

A stream's state is freed when it closes, but CPython and glibc keep freed memory for reuse: after a flood of
streams the broker's resident set stays at its peak. Once ``every`` streams have closed, a trim runs ``delay_s``
after the last of them closed: the wave's end, not its middle (a flood's refused streams close at once, its admitted
ones over seconds, as their registrations leave the name server; a trim at the ``every``-th close missed the rest
and none came after them), and ``max_wait_s`` after the wave's first close at the latest, so steady churn is
trimmed too. Streams of a wave closing after its trim (within ``max_wait_s``) get one more, however few. A trim
runs the garbage collector, then glibc's ``malloc_trim`` returns the free pages of its heaps.
Where glibc is absent (another libc) only the collection runs.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)


def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None


class MemoryTrim:
    """``released()`` after each stream's end; once ``every`` of them, a trim ``delay_s`` after the last one (at most
    ``max_wait_s`` after the first since the last trim)."""

    def __init__(self, every: int = 256, delay_s: float = 5.0, max_wait_s: float = 60.0) -> None:
        self.every = every
        self.delay_s = delay_s
        self.max_wait_s = max_wait_s
        self.trims = 0
        self._released = 0
        self._first_at = 0.0  # loop time of the first release since the last trim
        self._tail_until = float("-inf")  # after a wave's trim: until then, its stragglers get a trim of their own
        self._pending: asyncio.TimerHandle | None = None
        self._malloc_trim = _malloc_trim()

    def released(self) -> None:
        now = asyncio.get_running_loop().time()
        if self._released == 0:
            self._first_at = now
        self._released += 1
        if self._released < self.every and now > self._tail_until:
            return
        due = min(now + self.delay_s, self._first_at + self.max_wait_s)
        if self._pending is not None:
            if self._pending.when() >= due:
                return
            self._pending.cancel()
        self._pending = asyncio.get_running_loop().call_at(due, self._trim)

    def cancel(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None

    def _trim(self) -> None:
        self._pending = None
        released, self._released = self._released, 0
        wave = released >= self.every
        self._tail_until = asyncio.get_running_loop().time() + self.max_wait_s if wave else float("-inf")
        gc.collect()
        if self._malloc_trim is not None:
            self._malloc_trim(0)
        self.trims += 1
        log.info("%d gRPC streams closed: their memory handed back to the system", released)
