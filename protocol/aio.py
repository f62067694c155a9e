"""Small asyncio helpers.

``asyncio.wait_for`` on Python 3.11 can swallow a cancellation that arrives as the awaited
thing completes, which leaves a cancelled background loop running forever. These helpers
use ``asyncio.timeout``, which does not.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def wait_event(event: asyncio.Event, timeout_s: float) -> bool:
    """Wait until ``event`` is set or ``timeout_s`` passes; True when it was set."""
    if event.is_set():
        return True
    try:
        async with asyncio.timeout(timeout_s):
            await event.wait()
    except TimeoutError:
        return False
    return True


async def with_timeout(awaitable: Awaitable[T], timeout_s: float) -> T:
    """Await with a deadline; raises ``TimeoutError`` when it passes."""
    async with asyncio.timeout(timeout_s):
        return await awaitable


async def cancel_and_wait(task: asyncio.Task[object] | None) -> None:
    """Cancel a background loop and wait until it has finished."""
    if task is not None:
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
