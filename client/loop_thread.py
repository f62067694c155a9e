"""An event loop on a daemon thread: where a blocking client keeps the parts that stay async (its membership
heartbeats and watch, route lookups), off its send path; and graymq's shared loop (``shared_loop``), where the
synchronous facades and blocking clients of a process meet, so that those given one ``ClientConfig`` share its
``ClientInstance``."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

_T = TypeVar("_T")


class LoopThread:
    """``start()`` runs a new loop on a thread named ``name`` (``start(loop)``: uses ``loop``, running on a thread
    of its own); ``run`` waits for a coroutine on it, ``submit`` does not; ``stop()`` ends the loop it started and
    joins its thread (a loop it was given is left running)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        if loop is not None:
            self.loop, self._thread = loop, None
            return
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=self.name, daemon=True)
        self._thread.start()

    def submit(self, coro: Coroutine[Any, Any, _T]) -> concurrent.futures.Future[_T]:
        if self.loop is None:
            coro.close()
            raise RuntimeError(f"{self.name}: the loop is not running")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, _T], timeout_s: float | None = None) -> _T:
        """The coroutine's result; ``TimeoutError`` (the coroutine cancelled) after ``timeout_s``."""
        future = self.submit(coro)
        try:
            return future.result(timeout_s)
        except TimeoutError:
            future.cancel()
            raise

    def stop(self) -> None:
        loop, thread = self.loop, self._thread
        self.loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


_shared = LoopThread("graymq-loop")
_shared_lock = threading.Lock()


def shared_loop() -> asyncio.AbstractEventLoop:
    """The process's shared graymq loop (thread ``graymq-loop``), started on first use and running until exit."""
    with _shared_lock:
        if _shared.loop is None:
            _shared.start()
        assert _shared.loop is not None
        return _shared.loop
