"""Background tasks that never end unobserved: restarted after an unexpected exception, or ending their owner."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from graymq.protocol.errors import GrayMQError
from graymq.protocol.retry import Backoff, ThrottledLog

log = logging.getLogger(__name__)


class Supervisor:
    """Owns an object's background tasks.

    ``spawn(name, loop)`` runs ``loop()`` in a task. When it raises, a permanent ``GrayMQError``
    (see ``GrayMQError.permanent``) goes to ``on_fatal`` and the task ends; anything else is logged
    at ERROR with its traceback (the same failure at most every ``ThrottledLog`` interval) and
    ``loop()`` runs again after a jittered backoff (``on_restart`` first, to reset what the failed
    run left half done). Cancellation ends the task quietly, and a loop that returns is done.
    Every task also carries a done callback that logs whatever escaped all of that.
    """

    RESTART = (0.5, 30.0)  # backoff base and cap of a restart, seconds

    def __init__(self, owner: str, on_fatal: Callable[[GrayMQError, str], None]) -> None:
        self.owner = owner
        self.on_fatal = on_fatal
        self.tasks: set[asyncio.Task[None]] = set()
        self._errors = ThrottledLog(log)

    def spawn(self, name: str, loop: Callable[[], Awaitable[None]],
              on_restart: Callable[[], None] | None = None) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(self._run(name, loop, on_restart), name=f"{name} {self.owner}")
        self.watch(task)
        return task

    def watch(self, task: asyncio.Task[None]) -> None:
        """Track ``task`` and log at ERROR an exception it ends with (it is not awaited by anyone)."""
        self.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        self.report(task)

    def report(self, task: asyncio.Task[None]) -> None:
        """Log at ERROR the exception a finished task ended with, if any (for the done callbacks of untracked tasks)."""
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("%s: task %s ended with an unexpected error", self.owner, task.get_name(), exc_info=exc)

    def unexpected(self, name: str, exc: Exception, delay: float) -> None:
        """Log at ERROR, with its traceback (the same failure at most once per interval), that ``name`` failed
        unexpectedly and is retried in ``delay`` seconds."""
        self._errors.log(logging.ERROR, (name, type(exc), str(exc)),
                         "%s: %s failed unexpectedly (%s: %s); restarting it in %.1fs", self.owner, name,
                         type(exc).__name__, exc, delay, exc_info=exc)

    async def _run(self, name: str, loop: Callable[[], Awaitable[None]],
                   on_restart: Callable[[], None] | None) -> None:
        backoff = Backoff(*self.RESTART)
        while True:
            began = time.monotonic()
            try:
                await loop()
                return
            except GrayMQError as exc:
                if exc.permanent:
                    self.on_fatal(exc, name)
                    return
                failure: Exception = exc
            except Exception as exc:
                failure = exc
            if time.monotonic() - began > backoff.cap_s:
                backoff.reset()  # it ran well for a while: this is a new failure, not a repeat
            delay = backoff.next()
            self.unexpected(name, failure, delay)
            await asyncio.sleep(delay)
            if on_restart is not None:
                on_restart()

    async def cancel(self, tasks: list[asyncio.Task[None]]) -> None:
        """Cancel ``tasks`` and wait until they have ended."""
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
