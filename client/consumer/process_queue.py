"""ProcessQueue: one assigned queue's pull position and the offsets still being consumed."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from graymq.client.message import MessageExt, MessageQueue

READ_KEPT = 1024  # per queue: the ids of the last messages consumed, to compare with a new leader's log


class Stop(NamedTuple):
    """Where a client stopped on a queue it could not hand back (``offset``), and what it consumed below it:
    ``read`` lists (queue offset, msg id) of every message it consumed from ``read_from`` on, ascending.

    A new leader may hold other messages at offsets this client read from the old leader's uncopied tail (async
    replication; under sync, sends not acknowledged yet): resuming at ``offset`` would skip them (``parted_at``).
    """

    offset: int
    read: tuple[tuple[int, str], ...]
    read_from: int


def parted_at(read: Sequence[tuple[int, str]], held: Sequence[tuple[int, str]], held_to: int, stop: int) -> int:
    """The first offset below ``stop`` where a broker's log differs from what a client consumed: ``read`` and
    ``held`` (what the broker holds that the client's subscription takes, from the same offset up to ``held_to``)
    are (offset, msg id) pairs, ascending. A message without an id is never taken for the same.

    >>> parted_at([(5, "a"), (7, "b")], [(5, "a"), (7, "b")], 9, 8)  # it holds everything read: resume at 8
    8
    >>> parted_at([(5, "a"), (7, "b")], [(5, "a"), (6, "x"), (7, "b")], 9, 8)  # a message at 6 not read
    6
    >>> parted_at([(5, "a"), (7, "b")], [(5, "a"), (7, "c")], 9, 8)  # another message at 7
    7
    >>> parted_at([(5, "a"), (7, "b")], [(5, "a")], 6, 8)  # its log ends at 6
    6
    """
    for mine, theirs in itertools.zip_longest(read, held):
        if mine is None or theirs is None or mine != theirs or not mine[1]:
            return min(o for o in (mine and mine[0], theirs and theirs[0], held_to, stop) if o is not None)
    return min(held_to, stop)


@dataclass(eq=False)
class ProcessQueue:
    """The committable offset is the lowest one not yet consumed (at-least-once).

    ``_order`` is a min-heap of the offsets added and not yet known to be done, so finding the lowest
    in-flight offset (once per pull) costs the offsets finished since, not a scan of ``in_flight``. The messages in
    flight are kept by offset until the commit offset passes them; the ids of the last ``READ_KEPT`` passed stay in
    ``_read`` (every message consumed from ``_read_from`` on), for ``stop``.
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
    _pulled: dict[int, MessageExt] = field(default_factory=dict, init=False)
    _read: deque[tuple[int, str]] = field(default_factory=lambda: deque(maxlen=READ_KEPT), init=False)
    _read_from: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.space.set()
        self._read_from = self.pull_offset

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
            self._consumed(heapq.heappop(order))
        return order[0] if order else self.pull_offset

    def _consumed(self, offset: int) -> None:
        read, message = self._read, self._pulled.pop(offset, None)
        if message is None:  # added without its message: what was consumed up to here is unknown
            read.clear()
            self._read_from = offset + 1
            return
        if len(read) == read.maxlen:
            self._read_from = read[0][0] + 1
        read.append((offset, message.msg_id))

    def stop(self) -> Stop:
        """Where this client stopped (the commit offset) and what it consumed below it."""
        offset = self.commit_offset()
        return Stop(offset, tuple(self._read), self._read_from)
