"""The message being handled, as a context variable: sends made while handling a gray message are gray.

The push consumer sets it around each listener call (also inside worker threads), so a
producer used inside the handler inherits the gray mark and the trace id.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

from graymq.protocol.record import MessageExt

_current: contextvars.ContextVar[MessageExt | None] = contextvars.ContextVar("graymq_current_message", default=None)


def current_message() -> MessageExt | None:
    return _current.get()


@contextmanager
def handling(message: MessageExt | None) -> Iterator[None]:
    token = _current.set(message)
    try:
        yield
    finally:
        _current.reset(token)
