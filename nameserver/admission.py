"""The name server's heavy work (storing heartbeats, reading watches' views) done a few at a time, in order of
arrival; a heartbeat kept waiting too long is turned away at once, and work whose caller hung up is skipped.

A fleet starting together sends all of it at once: with every request in the thread pool together, each one's
statements took turns with all the others' for the GIL and the event loop's, so every request finished late, after
its client had given up and sent it again, and the listen queue filled with connections nobody waited for (5,000
clients did not converge). Here at most ``concurrency`` such requests run, the others wait their turn in the event
loop (costing nothing); a heartbeat that waited longer than ``queue_s`` gets a 503 ``busy`` with ``Retry-After`` at
once, without its work (its client beats again next interval, when the requests ahead of it are done), and a
request whose client disconnected while it waited (a watch round its session replaced) is not worked on at all.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import anyio
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from graymq.nameserver.errors import ApiError, CallerGone

T = TypeVar("T")


class Busy(ApiError):
    status_code = 503


class Admission:
    """Runs heavy work in the thread pool, ``concurrency`` at a time in order of arrival (anyio's limiter queues its
    waiters first come, first served)."""

    def __init__(self, concurrency: int, queue_s: float) -> None:
        self.queue_s = queue_s
        self._limiter = anyio.CapacityLimiter(concurrency)

    async def run(self, work: Callable[[], T], request: Request | None = None, *, shed: bool = False) -> T:
        """``work()``'s result once its turn came; ``Busy`` (``shed``) when it waited more than ``queue_s``,
        ``CallerGone`` when ``request``'s client disconnected meanwhile."""
        arrived = time.monotonic()
        async with self._limiter:
            waited = time.monotonic() - arrived
            if request is not None and waited > 0.01 and await request.is_disconnected():
                raise CallerGone
            if shed and waited > self.queue_s:
                raise Busy("busy", f"the name server is busy: this request waited {waited:.1f}s for its turn "
                           f"(more than {self.queue_s:g}s); send it again after Retry-After",
                           headers={"Retry-After": "1"})
            return await run_in_threadpool(work)
