"""Memory handed back to the system after a wave of gRPC streams has closed.

A stream's state is freed when it closes, but CPython and glibc keep freed memory for reuse: after a flood of
streams the broker's resident set stays at its peak. Once ``every`` streams have closed, and ``delay_s`` later (a
wave closes together, and its clients' unregistrations from the name server end), the garbage collector runs and
glibc's ``malloc_trim`` returns the free pages of its heaps.
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
    """``released()`` after each stream's end; every ``every`` of them, a trim ``delay_s`` later."""

    def __init__(self, every: int = 256, delay_s: float = 5.0) -> None:
        self.every = every
        self.delay_s = delay_s
        self.trims = 0
        self._released = 0
        self._pending: asyncio.TimerHandle | None = None
        self._malloc_trim = _malloc_trim()

    def released(self) -> None:
        self._released += 1
        if self._released >= self.every and self._pending is None:
            self._pending = asyncio.get_running_loop().call_later(self.delay_s, self._trim)

    def cancel(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None

    def _trim(self) -> None:
        self._pending = None
        released, self._released = self._released, 0
        gc.collect()
        if self._malloc_trim is not None:
            self._malloc_trim(0)
        self.trims += 1
        log.info("%d gRPC streams closed: their memory handed back to the system", released)
