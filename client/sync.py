"""Synchronous facades: the async clients driven from a background event-loop thread.

Every method of the wrapped object runs on that loop; coroutine methods are awaited there
and their result returned. No client logic lives here.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from graymq.client.consumer.pull_consumer import PullConsumer
from graymq.client.consumer.push_consumer import PushConsumer
from graymq.client.loop_thread import shared_loop
from graymq.client.producer import Producer


async def _call(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    result = fn(*args, **kwargs)
    if inspect.isawaitable(result):
        result = await result
    return result


class SyncFacade:
    """Wraps an async client built on the background loop; attribute reads pass through."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        object.__setattr__(self, "_loop", shared_loop())
        object.__setattr__(self, "core", self._run(factory, (), {}))

    def _run(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(_call(fn, args, kwargs), self._loop).result()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.core, name)
        if callable(attr):
            return lambda *args, **kwargs: self._run(attr, args, kwargs)
        return attr


class SyncProducer(SyncFacade):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(lambda: Producer(*args, **kwargs))


class SyncPushConsumer(SyncFacade):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(lambda: PushConsumer(*args, **kwargs))


class SyncPullConsumer(SyncFacade):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(lambda: PullConsumer(*args, **kwargs))
