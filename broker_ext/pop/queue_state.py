"""One queue of one group, as pop consumers use it: handed out, in flight, acked, committed.

Every offset in ``[committed, next_offset)`` is either in flight or acked (a message the group's tag filter
skipped counts as acked); ``committed`` is the lowest offset not acked, so it moves only as the lowest unacked
message is acked. Acks above ``next_offset`` come from the journal after a restart: those messages are not
handed out again.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class InFlight:
    """A message handed out and not acked: its attempt (1-based), the serial of its newest handle and when it
    becomes visible again (the service's monotonic clock)."""

    offset: int
    attempt: int
    serial: int
    deadline: float


@dataclass(slots=True)
class PopQueue:
    """``committed``: the group's committed offset (next not acked); ``next_offset``: next never handed out."""

    committed: int
    next_offset: int
    in_flight: dict[int, InFlight] = field(default_factory=dict)
    acked: set[int] = field(default_factory=set)
    visible_at: float = 0.0  # when the last message handed out becomes visible again, at the latest

    @property
    def idle(self) -> bool:
        """Nothing in flight and no ack waiting above the committed offset: the offset manager's value rules."""
        return not self.in_flight and not self.acked

    def reset(self, offset: int) -> None:
        """Start from ``offset`` (only when idle: a push consumer or an admin moved the committed offset)."""
        self.committed = self.next_offset = offset

    def expired(self, now: float) -> list[InFlight]:
        """The messages in flight whose invisible time is over, lowest offset first."""
        return sorted((f for f in self.in_flight.values() if f.deadline <= now), key=lambda f: f.offset)

    def deliver(self, offset: int, attempt: int, serial: int, deadline: float) -> None:
        self.in_flight[offset] = InFlight(offset, attempt, serial, deadline)
        self.next_offset = max(self.next_offset, offset + 1)
        self.visible_at = max(self.visible_at, deadline)

    def passed(self, next_begin: int) -> None:
        """The store's scan reached ``next_begin``: offsets below it never handed out were filtered or are gone."""
        if self.committed == self.next_offset:  # nothing below: the committed offset moves with the scan
            self.committed = max(self.committed, next_begin)
        else:  # never in flight: every offset in flight is below next_offset
            self.acked.update(range(self.next_offset, next_begin))
        self.next_offset = max(self.next_offset, next_begin)
        self._advance()

    def current(self, offset: int, serial: int, now: float) -> InFlight | None:
        """The delivery a handle names, while it is the newest one and its invisible time runs."""
        flight = self.in_flight.get(offset)
        if flight is None or flight.serial != serial or flight.deadline <= now:
            return None
        return flight

    def ack(self, offset: int) -> None:
        """``offset`` is done (acked, dead-lettered or skipped); the committed offset follows."""
        self.in_flight.pop(offset, None)
        if offset >= self.committed:
            self.acked.add(offset)
        self._advance()

    def _advance(self) -> None:
        while self.committed in self.acked:
            self.acked.discard(self.committed)
            self.committed += 1
        self.next_offset = max(self.next_offset, self.committed)

    def earliest_deadline(self) -> float | None:
        return min((f.deadline for f in self.in_flight.values()), default=None)
