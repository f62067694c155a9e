"""Background work of the store: blocking file work run off the event loop, and stopping loops."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from graymq.broker_ext.store.atomic_file import json_bytes, write_atomic
from graymq.protocol.aio import cancel_and_wait

__all__ = ["BlockingWork", "cancel_and_wait"]

T = TypeVar("T")


class BlockingWork:
    """Runs functions in the default executor.

    Cancelling the task that awaits ``run`` does not stop the thread; ``drain`` waits for work
    left running that way, so files are never closed under a running fsync.
    """

    def __init__(self) -> None:
        self._pending: set[asyncio.Future[Any]] = set()

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        future = asyncio.get_running_loop().run_in_executor(None, fn, *args)
        self._pending.add(future)
        future.add_done_callback(self._pending.discard)
        return await asyncio.shield(future)

    async def write_json(self, path: Path, obj: Any) -> None:
        """Encode ``obj`` now (a snapshot, on the loop), write and fsync it with ``write_atomic`` in a thread."""
        await self.run(write_atomic, path, json_bytes(obj))

    async def drain(self) -> None:
        if self._pending:
            await asyncio.wait(list(self._pending))

