"""The store's fatal state: a failed fsync stops the broker (DESIGN.md §6).

After a failed fsync the kernel may have dropped the dirty pages and a retried fsync can report
success for data never written, so nothing is retried: the first failure is kept, every later
flush fails with it, and the broker waits on ``wait`` next to its stop signal, then exits without
marking a clean stop (the next start runs crash recovery).
"""

from __future__ import annotations

import asyncio
import errno
import os

from graymq.protocol.errors import GrayMQError


class StoreFatalError(GrayMQError):
    """The store cannot make data durable any more."""


class FatalState:
    """The first fatal failure of a store; ``fail`` runs on the event loop thread."""

    def __init__(self) -> None:
        self.error: StoreFatalError | None = None
        self._event = asyncio.Event()

    def fail(self, what: str, exc: OSError) -> StoreFatalError:
        """Keep the first failure (``what`` failed with ``exc``) and wake ``wait``; returns the kept error."""
        if self.error is None:
            name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
            text = os.strerror(exc.errno) if exc.errno else str(exc)
            self.error = StoreFatalError(
                f"{what} failed: fsync of {exc.filename or 'a store file'} returned {name} ({text}); "
                "the store stops without retrying it"
            )
            self._event.set()
        return self.error

    async def wait(self) -> StoreFatalError:
        await self._event.wait()
        assert self.error is not None
        return self.error
