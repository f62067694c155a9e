"""Commit-log flushing: a periodic flush (async mode) or group commit (sync mode).

Group commit: a sync send appends its records, then awaits ``wait_flushed(end_offset)``. The
flush loop wakes up, takes the log's current end as its target and runs one fdatasync round in
a worker thread while the event loop keeps appending; when it returns, every waiter whose end
offset is covered is released at once. Waiters that arrived meanwhile are served by the next
round, so any number of concurrent sends share one fsync. Both modes also flush every
``interval_s``; nothing is fsynced per message.

A failed fsync is fatal (fatal.py): every waiter fails with the error, the loop ends, and no fsync
runs again, not even at ``stop``.

The exposure is kept in the store's stats: ``unflushed_bytes`` and the time of the oldest append not
yet durable (``unflushed_since``). The first append after each round took its target is timestamped;
when a round completes, the oldest such append at or past the flushed offset is the oldest unflushed one.
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import itertools
import time

from graymq.broker_ext.store.background import BlockingWork, cancel_and_wait
from graymq.broker_ext.store.commitlog import CommitLog
from graymq.broker_ext.store.fatal import FatalState, StoreFatalError
from graymq.broker_ext.store.stats import StoreStats
from graymq.protocol.aio import wait_event
from graymq.protocol.errors import FlushTimeoutError


class FlushService:
    """Owns ``flushed_offset``: the commit log is durable below it."""

    def __init__(self, commitlog: CommitLog, stats: StoreStats, *, sync: bool, interval_s: float,
                 timeout_s: float, fatal: FatalState) -> None:
        self.commitlog = commitlog
        self.fatal = fatal
        self.stats = stats
        self.sync = sync
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.flushed_offset = 0
        # (end offset, sequence, waiter, its timeout handle), a heap ordered by end offset
        self._waiters: list[tuple[int, int, asyncio.Future[None], asyncio.TimerHandle]] = []
        self._sequence = itertools.count()
        self._wakeup: asyncio.Event | None = None  # created in start(), inside the running loop
        self._work = BlockingWork()
        self._task: asyncio.Task[None] | None = None
        self._target = 0  # the highest target a round has taken
        self._appends: collections.deque[tuple[int, float]] = collections.deque()  # (offset, monotonic time) of the
        # first append after each round's target, oldest first

    def start(self) -> None:
        self._wakeup = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="graymq-store-flush")

    async def stop(self) -> None:
        """Stop the loop, let a running fsync finish, then flush what is left."""
        await cancel_and_wait(self._task)
        self._task = None
        await self._work.drain()
        if self.fatal.error is None:
            await self.flush()

    async def wait_flushed(self, end_offset: int) -> None:
        """Sync mode: wait until the log is durable up to ``end_offset``; async mode: return at once."""
        waiter = self.flushed_future(end_offset)
        if waiter is not None:
            await waiter

    def flushed_future(self, end_offset: int) -> asyncio.Future[None] | None:
        """A future resolved once the log is durable up to ``end_offset``, failed with ``FlushTimeoutError``
        after ``timeout_s``; ``None`` when nothing needs waiting for (async mode, or already durable).

        A plain future with a timer handle, so a sync send needs neither a task nor a timeout context.
        """
        if not self.sync or end_offset <= self.flushed_offset:
            return None
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        if self.fatal.error is not None:
            waiter.set_exception(self.fatal.error)
            return waiter
        timer = loop.call_later(self.timeout_s, self._expire, waiter, end_offset)
        heapq.heappush(self._waiters, (end_offset, next(self._sequence), waiter, timer))
        if self._wakeup is not None:
            self._wakeup.set()
        return waiter

    def appended(self, start: int, end: int) -> None:
        """Note an append of ``[start, end)`` to the commit log (loop thread), for the exposure stats."""
        stats = self.stats
        if not self._appends or self._appends[-1][0] < self._target:
            now = time.monotonic()
            self._appends.append((start, now))
            if stats.unflushed_since is None:
                stats.unflushed_since = now
        stats.unflushed_bytes = end - self.flushed_offset

    def _note_flushed(self) -> None:
        appends = self._appends
        while appends and appends[0][0] < self.flushed_offset:
            appends.popleft()
        stats = self.stats
        stats.unflushed_bytes = max(0, self.commitlog.max_offset - self.flushed_offset)
        stats.unflushed_since = appends[0][1] if appends and stats.unflushed_bytes else None

    def _expire(self, waiter: asyncio.Future[None], end_offset: int) -> None:
        if not waiter.done():
            waiter.set_exception(FlushTimeoutError(
                f"commit log not flushed up to {end_offset} within {self.timeout_s * 1000:.0f} ms"
            ))

    async def flush(self) -> None:
        """One round: make the log durable up to its current end, then release the covered waiters.

        Rounds may overlap (the loop and an explicit call): each fsyncs its whole range and the
        flushed offset only moves forward. Raises ``StoreFatalError`` when this or an earlier fsync failed.
        """
        target = self.commitlog.max_offset
        if self.fatal.error is not None:
            self._fail_waiters(self.fatal.error)
            raise self.fatal.error
        if target > self.flushed_offset:
            self._target = max(self._target, target)
            try:
                seconds = await self._work.run(self._sync_range, self.flushed_offset, target)
            except OSError as exc:
                error = self.fatal.fail(f"commit log flush up to {target}", exc)
                self._fail_waiters(error)
                raise error from exc
            self.flushed_offset = max(self.flushed_offset, target)
            self.stats.flush_count += 1
            self.stats.flush_seconds_total += seconds
            self.stats.last_flush_ms = seconds * 1000
            self._note_flushed()
        while self._waiters and self._waiters[0][0] <= self.flushed_offset:
            _, _, waiter, timer = heapq.heappop(self._waiters)
            timer.cancel()
            if not waiter.done():
                waiter.set_result(None)

    def _sync_range(self, start: int, end: int) -> float:
        began = time.perf_counter()
        self.commitlog.flush(start, end)
        return time.perf_counter() - began

    def _fail_waiters(self, error: StoreFatalError) -> None:
        """Fail every waiter: none can be served once the store is fatal."""
        while self._waiters:
            _, _, waiter, timer = heapq.heappop(self._waiters)
            timer.cancel()
            if not waiter.done():
                waiter.set_exception(error)

    async def _run(self) -> None:
        wakeup = self._wakeup
        assert wakeup is not None
        while True:
            await wait_event(wakeup, self.interval_s)
            wakeup.clear()
            try:
                await self.flush()
            except StoreFatalError:
                return  # the store is fatal: the broker stops
