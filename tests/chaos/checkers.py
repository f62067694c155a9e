"""Chaos checkers: pure functions over what a workload recorded (acked sends, consumptions).

Each checker takes plain records and returns what it found, so it can be unit-tested without a cluster:

- ``lost``: acked but never consumed by anyone;
- ``duplicated``: consumed more than once (after a crash at-least-once allows it: reported, not a failure);
- ``stored_twice``: of those, the messages the broker holds at more than one position (a producer's retry the
  broker did not recognise), as opposed to one stored message delivered again;
- ``reordered``: one consumer took a queue's offsets out of order (redeliveries are not counted);
- ``gray_violations``: a normal (v1) consumer got a gray message while isolation was in force;
- ``recovery_time``: from a fault to the first consumption of traffic sent after it;
- ``split_acks``: queue positions acknowledged for two different messages: two replicas acting as leader at once
  (split brain), one of them bound to lose what it acknowledged;
- ``longest_gap``: the longest time without an ack (or a consumption) from a fault on: how long writes (reads) were
  unavailable.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Sent:
    """One acked send: where the broker stored the message."""

    msg_id: str
    topic: str
    broker: str
    queue_id: int
    queue_offset: int
    gray: bool
    sharding_key: str | None
    commit_log_offset: int
    sent_at: float  # time.monotonic() when the send began
    acked_at: float  # ... and when its ack arrived


@dataclass(frozen=True, slots=True)
class Consumed:
    """One message handed to a consumer's listener."""

    msg_id: str
    client_id: str
    version: str  # "v1" (normal release) or "v2" (gray release)
    topic: str
    broker: str
    queue_id: int
    queue_offset: int
    gray: bool  # the message's gray mark
    at: float  # time.monotonic() when the listener got it


@dataclass(frozen=True, slots=True)
class Window:
    """A span of time ``[start, end)`` (monotonic seconds)."""

    start: float
    end: float

    def __contains__(self, t: float) -> bool:
        return self.start <= t < self.end


def lost(sent: Iterable[Sent], consumed: Iterable[Consumed]) -> list[Sent]:
    """Acked sends no consumer ever got, in ack order.

    >>> a = Sent("a", "T", "b", 0, 0, False, None, 0, 0.9, 1.0)
    >>> [s.msg_id for s in lost([a], [])]
    ['a']
    """
    seen = {c.msg_id for c in consumed}
    return sorted((s for s in sent if s.msg_id not in seen), key=lambda s: s.acked_at)


def duplicated(consumed: Iterable[Consumed]) -> dict[str, int]:
    """msg id -> how many times it was consumed, for those consumed more than once (by anyone)."""
    counts = Counter(c.msg_id for c in consumed)
    return {msg_id: n for msg_id, n in counts.items() if n > 1}


def stored_twice(consumed: Iterable[Consumed]) -> dict[str, int]:
    """msg id -> how many positions (broker, topic, queue, offset) it was consumed at, for those at more than one.

    >>> def got(msg_id, client, offset): return Consumed(msg_id, client, "v1", "T", "b", 0, offset, False, 0.0)
    >>> stored_twice([got("a", "c1", 5), got("a", "c2", 5), got("b", "c1", 7), got("b", "c1", 9)])
    {'b': 2}
    """
    positions: dict[str, set[tuple[str, str, int, int]]] = {}
    for c in consumed:
        positions.setdefault(c.msg_id, set()).add((c.broker, c.topic, c.queue_id, c.queue_offset))
    return {msg_id: len(p) for msg_id, p in positions.items() if len(p) > 1}


def reordered(consumed: Sequence[Consumed]) -> list[tuple[Consumed, int]]:
    """First consumptions that went backwards in their queue, per consumer: ``(event, highest offset before)``.

    ``consumed`` is in the order the listeners ran. A consumer seeing a message again (a redelivery after a
    crash or a rebalance) is a duplicate, not a reordering, so only each consumer's first sight of a message
    counts; those must come in increasing queue offset within one (topic, broker, queue).
    """
    highest: dict[tuple[str, str, str, int], int] = {}
    first_seen: set[tuple[str, str]] = set()
    out = []
    for c in consumed:
        if (c.client_id, c.msg_id) in first_seen:
            continue
        first_seen.add((c.client_id, c.msg_id))
        key = (c.client_id, c.topic, c.broker, c.queue_id)
        top = highest.get(key)
        if top is not None and c.queue_offset < top:
            out.append((c, top))
        else:
            highest[key] = c.queue_offset
    return out


def gray_violations(consumed: Iterable[Consumed], isolated: Sequence[Window],
                    normal_versions: frozenset[str] = frozenset({"v1"})) -> list[Consumed]:
    """Gray messages consumed by a normal consumer (its version in ``normal_versions``) during a window of
    ``isolated`` (the group's gray switch on and no adopt policy in force)."""
    return [c for c in consumed
            if c.gray and c.version in normal_versions and any(c.at in w for w in isolated)]


def recovery_time(fault_at: float, sent: Iterable[Sent], consumed: Iterable[Consumed]) -> float | None:
    """Seconds from ``fault_at`` to the first consumption of a message whose send began at or after it: the
    system serves new traffic again (a message acked or pulled before the fault, still on its way, does not
    count). ``None`` when no such message was consumed.

    >>> s = [Sent("new", "T", "b", 0, 9, False, None, 0, 11.0, 12.0)]
    >>> c = [Consumed("old", "c", "v1", "T", "b", 0, 8, False, 10.5), Consumed("new", "c", "v1", "T", "b", 0, 9,
    ...      False, 13.0)]
    >>> recovery_time(10.0, s, c)
    3.0
    """
    after = {s.msg_id for s in sent if s.sent_at >= fault_at}
    times = [c.at for c in consumed if c.msg_id in after]
    return min(times) - fault_at if times else None


def reused_positions(consumed: Iterable[Consumed]) -> set[tuple[str, str, str, int, int]]:
    """(client, topic, broker, queue, offset) where one consumer got two different messages: a new leader stored new
    messages at offsets its predecessor had used for a tail nobody copied (async replication: that tail is moved
    aside), after the consumer had read them from the predecessor.

    >>> def got(msg_id, offset): return Consumed(msg_id, "c1", "v1", "T", "b", 0, offset, False, 0.0)
    >>> sorted(reused_positions([got("a", 5), got("x", 6), got("a", 5), got("y", 6)]))
    [('c1', 'T', 'b', 0, 6)]
    """
    ids: dict[tuple[str, str, str, int, int], set[str]] = {}
    for c in consumed:
        ids.setdefault((c.client_id, c.topic, c.broker, c.queue_id, c.queue_offset), set()).add(c.msg_id)
    return {position for position, seen in ids.items() if len(seen) > 1}


def split_acks(sent: Iterable[Sent]) -> dict[tuple[str, str, int, int], list[str]]:
    """(broker, topic, queue, offset) -> msg ids (sorted), for positions acknowledged for more than one message.

    >>> def at(msg_id, offset): return Sent(msg_id, "T", "b", 0, offset, False, None, 0, 0.0, 0.1)
    >>> split_acks([at("a", 5), at("b", 6), at("c", 6)])
    {('b', 'T', 0, 6): ['b', 'c']}
    """
    positions: dict[tuple[str, str, int, int], set[str]] = {}
    for s in sent:
        positions.setdefault((s.broker, s.topic, s.queue_id, s.queue_offset), set()).add(s.msg_id)
    return {position: sorted(ids) for position, ids in positions.items() if len(ids) > 1}


def longest_gap(times: Iterable[float], start: float, end: float) -> float:
    """The longest span of ``[start, end]`` holding none of ``times`` (acks or consumptions): from ``start`` to the
    first one, between two, or from the last one to ``end``.

    >>> longest_gap([9.0, 10.5, 11.0, 14.0, 14.2], start=10.0, end=15.0)
    3.0
    >>> longest_gap([], start=10.0, end=12.5)
    2.5
    """
    points = [start, *sorted(t for t in times if start < t < end), end]
    return max(b - a for a, b in zip(points, points[1:], strict=False))


def messages_in(sent: Iterable[Sent], start: int, length: int) -> list[Sent]:
    """Acked sends whose record starts in the commit log range ``[start, start + length)`` (a hole's span)."""
    return [s for s in sent if start <= s.commit_log_offset < start + length]
