"""ProcessQueue: one assigned queue's pull position and the offsets still being consumed."""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from graymq.client.message import MessageExt, MessageQueue


class Stop(NamedTuple):
    """Where a client stopped on a queue it could not hand back: the offset, and the id of the message it read just
    before it (None when unknown). A new leader holding another message there stores new messages at offsets
    this client read from the old leader's uncopied tail (async replication): resuming at ``offset`` skips them."""

    offset: int
    msg_id: str | None


@dataclass(eq=False)
class ProcessQueue:
    """The committable offset is the lowest one not yet consumed (at-least-once).

    ``_order`` is a min-heap of the offsets added and not yet known to be done, so finding the lowest
    in-flight offset (once per pull) costs the offsets finished since, not a scan of ``in_flight``. The messages in
    flight are kept by offset until the commit offset passes them, the last one passed in ``last_done``.
    """

    mq: MessageQueue
    address: str
    pull_offset: int
    adopted: bool = False
    lane: str | None = None  # the lane whose slot holds the queue, as the route said when it was taken
    in_flight: set[int] = field(default_factory=set)
    dropped: bool = False
    committed: int = -1
    task: asyncio.Task[None] | None = None
    consuming: set[asyncio.Task[None]] = field(default_factory=set)  # listener batches of this queue running
    in_listener: bool = False  # an orderly batch is in the listener (the pull task itself runs it)
    space: asyncio.Event = field(default_factory=asyncio.Event)
    last_done: MessageExt | None = field(default=None, init=False)  # the highest message below the commit offset
    _order: list[int] = field(default_factory=list, init=False)
    _pulled: dict[int, MessageExt] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.space.set()

    def add(self, offsets: list[int], next_offset: int, max_in_flight: int,
            messages: Sequence[MessageExt] = ()) -> None:
        """``offsets`` pulled (``messages``: theirs, when known) and dispatched; the next pull at ``next_offset``."""
        self.in_flight.update(offsets)
        self._pulled.update(zip(offsets, messages, strict=False))
        order = self._order
        for offset in offsets:
            heapq.heappush(order, offset)
        self.pull_offset = next_offset
        if len(self.in_flight) >= max_in_flight:
            self.space.clear()

    def advance(self, next_offset: int) -> None:
        """Nothing to consume up to ``next_offset`` (filtered or empty)."""
        self.pull_offset = next_offset

    def done(self, offsets: list[int], max_in_flight: int) -> None:
        self.in_flight.difference_update(offsets)
        if len(self.in_flight) < max_in_flight:
            self.space.set()

    def rewind(self) -> None:
        """Pull again from the commit offset, forgetting what is in flight (its late ``done`` is ignored).

        Used when a pull loop is restarted after an unexpected error: some of what it pulled may never
        have reached the listener, and nothing may be left in flight forever (the commit would stall).
        """
        self.pull_offset = self.commit_offset()
        self.in_flight.clear()
        self._order.clear()
        self._pulled.clear()
        self.space.set()

    def commit_offset(self) -> int:
        order, in_flight = self._order, self.in_flight
        while order and order[0] not in in_flight:
            self.last_done = self._pulled.pop(heapq.heappop(order), self.last_done)
        return order[0] if order else self.pull_offset

    def stop(self) -> Stop:
        """Where this client stopped (the commit offset) and the id of the message it read just before it."""
        offset, last = self.commit_offset(), self.last_done
        return Stop(offset, last.msg_id if last is not None and last.queue_offset == offset - 1 else None)
