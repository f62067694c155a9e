"""Runs the listener on pulled messages: concurrently (batches in parallel) or orderly (one at a time per queue).

Sync listeners run in a thread pool, async ones on the loop; either way the message being
handled is visible to producers through ``graymq.client.context`` (gray and trace id propagate), and each message
is a consumer span (naming its lane) while it is handled when tracing is on (``graymq.client.tracing``).
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from graymq.client.context import handling
from graymq.client.message import ConsumeStatus, MessageExt
from graymq.client.tracing import process_spans

log = logging.getLogger(__name__)

Listener = Callable[[list[MessageExt]], ConsumeStatus | None | Awaitable[ConsumeStatus | None]]


class ListenerRunner:
    """Calls the user's listener; an exception or ``RECONSUME_LATER`` counts as a failure."""

    def __init__(self, listener: Listener, max_threads: int, group: str) -> None:
        self.listener = listener
        self.group = group
        self._is_async = inspect.iscoroutinefunction(listener) or inspect.iscoroutinefunction(
            type(listener).__call__
        )
        self._pool = None if self._is_async else ThreadPoolExecutor(max_threads, thread_name_prefix="graymq-consume")

    async def run(self, messages: Sequence[MessageExt], lane: str | None = None) -> bool:
        """Whether the listener accepted ``messages`` (of one queue; ``lane``: that queue's lane)."""
        batch = list(messages)
        with process_spans(self.group, batch, lane) as processing:
            try:
                if self._is_async:
                    with handling(batch[0], lane):
                        status = await self.listener(batch)  # type: ignore[misc]
                else:
                    assert self._pool is not None
                    ctx = contextvars.copy_context()  # the span and the message, seen from the pool's thread
                    status = await asyncio.get_running_loop().run_in_executor(
                        self._pool, ctx.run, self._call_sync, batch, lane)
            except Exception as exc:
                log.exception("listener failed on %d message(s) of %s", len(batch), batch[0].topic)
                processing.finished(False, exc)
                return False
            ok = status is None or status == ConsumeStatus.CONSUME_SUCCESS
            processing.finished(ok)
            return ok

    def _call_sync(self, batch: list[MessageExt], lane: str | None) -> ConsumeStatus | None:
        with handling(batch[0], lane):
            return self.listener(batch)  # type: ignore[return-value]

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=False)
