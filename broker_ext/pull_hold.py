"""Long polling: pulls that found nothing wait here until a message arrives on their queue or time runs out."""

from __future__ import annotations

import asyncio

from protocol.aio import with_timeout


class PullRequestHoldService:
    """Waiters keyed by (topic, queue_id); ``notify`` wakes them all after an append."""

    def __init__(self) -> None:
        self._waiters: dict[tuple[str, int], set[asyncio.Future[None]]] = {}

    async def wait(self, topic: str, queue_id: int, timeout_s: float) -> bool:
        """Wait for a message on the queue; returns False on timeout."""
        key = (topic, queue_id)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiters = self._waiters.setdefault(key, set())
        waiters.add(future)
        try:
            await with_timeout(future, timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            waiters.discard(future)
            if not waiters and self._waiters.get(key) is waiters:
                del self._waiters[key]

    def notify(self, topic: str, queue_id: int) -> None:
        waiters = self._waiters.get((topic, queue_id))
        if waiters:
            for future in waiters:
                if not future.done():
                    future.set_result(None)

    def wake_all(self) -> None:
        """Release every waiter (shutdown)."""
        for waiters in self._waiters.values():
            for future in waiters:
                if not future.done():
                    future.set_result(None)

    @property
    def waiting(self) -> int:
        return sum(len(w) for w in self._waiters.values())
