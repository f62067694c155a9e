"""The message being handled, as a context variable: sends made while handling a message of a lane go to that lane.

The push consumer sets it around each listener call (also inside worker threads), with the lane of the queue the
message came from, so a producer used inside the handler inherits the lane and the trace id.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

from graymq.core.gray_side import Mark
from graymq.protocol.record import MessageExt

_current: contextvars.ContextVar[MessageExt | None] = contextvars.ContextVar("graymq_current_message", default=None)
_lane: contextvars.ContextVar[str | None] = contextvars.ContextVar("graymq_current_lane", default=None)


def current_message() -> MessageExt | None:
    return _current.get()


def propagated_mark(message: MessageExt | None) -> Mark:
    """The mark a send inherits from ``message`` (the one being handled): None without one, False for a base
    message, else the lane of the queue it came from (True: the ``gray`` lane, or a lane not known)."""
    if message is None:
        return None
    if not message.gray:
        return False
    return _lane.get() or True


@contextmanager
def handling(message: MessageExt | None, lane: str | None = None) -> Iterator[None]:
    """``message`` is being handled; ``lane``: the lane of the queue it came from."""
    token, lane_token = _current.set(message), _lane.set(lane)
    try:
        yield
    finally:
        _current.reset(token)
        _lane.reset(lane_token)
