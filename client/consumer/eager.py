"""Running a coroutine at once, on the caller's turn of the event loop, with a task only if it has to wait.

A listener batch that finishes without waiting (the common case: the listener records or forwards what it got
and returns) then costs no task, no scheduled step, no done callback and no extra turn of the loop — what the
eager task factory of Python 3.12 does, which 3.11 lacks. Either way the coroutine runs in a context of its own,
as it would in a task, so what it sets in context variables does not leak into the caller.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Coroutine, Generator
from typing import Any


def run_eagerly(coro: Coroutine[Any, Any, None], name: str | None = None) -> asyncio.Task[None] | None:
    """Run ``coro`` until it ends or first waits: None when it ended (an exception it raised propagates here),
    else the task that runs the rest of it (cancelling the task cancels what the coroutine waits for)."""
    context = contextvars.copy_context()
    try:
        awaited = context.run(coro.send, None)
    except StopIteration:
        return None
    return asyncio.get_running_loop().create_task(_rest(_Resume(coro, awaited)), name=name, context=context)


async def _rest(resume: _Resume) -> None:
    await resume


class _Resume:
    """The rest of a coroutine suspended on ``awaited``: it yields to its task what the coroutine yields and
    passes on what the task sends or throws in (a cancellation included), so the task drives the coroutine
    exactly as if it had started it."""

    __slots__ = ("coro", "awaited")

    def __init__(self, coro: Coroutine[Any, Any, None], awaited: Any) -> None:
        self.coro = coro
        self.awaited = awaited

    def __await__(self) -> Generator[Any, Any, None]:
        coro, awaited = self.coro, self.awaited
        while True:
            step: Callable[[Any], Any]
            try:
                sent = yield awaited
            except BaseException as exc:  # noqa: BLE001 - thrown in by the task (a cancellation): the coroutine decides
                step, sent = coro.throw, exc
            else:
                step = coro.send
            try:
                awaited = step(sent)
            except StopIteration:
                return
