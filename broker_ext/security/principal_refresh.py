"""Reading the principals again when a connection presents a token the broker does not know yet.

A principal added a moment ago is unknown to a broker until its next registration round (every
``GRAYMQ_BROKER_REGISTER_INTERVAL_S``); instead of refusing its token meanwhile, the broker reads the
principals once more, then checks the token again. Bounded: at most one read per ``min_interval_s``,
and every unknown token arriving meanwhile waits for that same read, so a flood of bad tokens costs the
name server one request per interval, not one per token.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from graymq.protocol.aio import cancel_and_wait

MIN_INTERVAL_S = 1.0


class PrincipalRefresh:
    """``await refresh()`` returns once a read of the principals that began after the call has ended."""

    def __init__(self, read: Callable[[], Awaitable[object]], min_interval_s: float = MIN_INTERVAL_S) -> None:
        self._read = read
        self.min_interval_s = min_interval_s
        self._last = -min_interval_s  # monotonic time the last read began
        self._waiting: asyncio.Task[None] | None = None  # the next read, shared by every caller until it begins
        self._reading: asyncio.Task[None] | None = None  # the read under way
        self.reads = 0

    async def __call__(self) -> None:
        if self._waiting is None:
            self._waiting = asyncio.get_running_loop().create_task(self._run(self._reading), name="principal-refresh")
        await asyncio.shield(self._waiting)

    async def _run(self, previous: asyncio.Task[None] | None) -> None:
        if previous is not None and not previous.done():
            await asyncio.wait({previous})  # it may have begun before the token's principal was added
        wait = self._last + self.min_interval_s - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        self._waiting, self._reading = None, asyncio.current_task()  # type: ignore[assignment]
        self._last = time.monotonic()
        self.reads += 1
        await self._read()

    async def stop(self) -> None:
        for task in (self._waiting, self._reading):
            await cancel_and_wait(task)  # type: ignore[arg-type]
