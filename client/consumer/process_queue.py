"""ProcessQueue: one assigned queue's pull position and the offsets still being consumed."""

from __future__ import annotations

import asyncio
import heapq
from dataclasses import dataclass, field

from graymq.client.message import MessageQueue


@dataclass(eq=False)
class ProcessQueue:
    """The committable offset is the lowest one not yet consumed (at-least-once).

    ``_order`` is a min-heap of the offsets added and not yet known to be done, so finding the lowest
    in-flight offset (once per pull) costs the offsets finished since, not a scan of ``in_flight``.
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
    _order: list[int] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self.space.set()

    def add(self, offsets: list[int], next_offset: int, max_in_flight: int) -> None:
        self.in_flight.update(offsets)
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
        self.space.set()

    def commit_offset(self) -> int:
        order, in_flight = self._order, self.in_flight
        while order and order[0] not in in_flight:
            heapq.heappop(order)
        return order[0] if order else self.pull_offset
