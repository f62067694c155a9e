"""Heartbeats stored a few at a time, in order of arrival; one kept waiting too long is turned away at once.

Storing heartbeats is the name server's heaviest work, and a fleet starting together sends it all at once: with
every request in the thread pool together, each one's statements took turns with all the others' for the GIL and
the event loop's, so every request finished late, after its client had given up and sent it again, and the
listen queue filled with connections nobody waited for (5,000 clients did not converge). Here at most
``concurrency`` heartbeat requests run, the others wait their turn in the event loop (costing nothing), and one
that waited longer than ``queue_s`` gets a 503 ``busy`` with ``Retry-After`` at once, without its work: its
client tries again at its next beat, when the requests ahead of it are done.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import anyio
from starlette.concurrency import run_in_threadpool

from graymq.nameserver.errors import ApiError

T = TypeVar("T")


class Busy(ApiError):
    status_code = 503


class HeartbeatAdmission:
    """Runs heartbeat work in the thread pool, ``concurrency`` at a time in order of arrival (anyio's limiter
    queues its waiters first come, first served), turning away what waited more than ``queue_s``."""

    def __init__(self, concurrency: int, queue_s: float) -> None:
        self.queue_s = queue_s
        self._limiter = anyio.CapacityLimiter(concurrency)

    async def run(self, work: Callable[[], T]) -> T:
        arrived = time.monotonic()
        async with self._limiter:
            waited = time.monotonic() - arrived
            if waited > self.queue_s:
                raise Busy("busy", f"the name server is busy: this heartbeat waited {waited:.1f}s for its turn "
                           f"(more than {self.queue_s:g}s); send it again after Retry-After",
                           headers={"Retry-After": "1"})
            return await run_in_threadpool(work)
