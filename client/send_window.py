"""The send window: a producer's sequence numbers per (broker, topic, queue), and how many may be unresolved.

A sequence is *unresolved* while the producer may still send it (again): from when it is taken until its send
ends — answered, stopped (an error, the timeout, a cancellation), or moved to another queue under a new number
after a failure that certainly stored nothing. A broker keeps the ``SEQUENCES_KEPT`` highest stored sequences of
a producer and queue and answers one at or below the highest it dropped as stored before, without storing it
(broker_ext/processors/producer_table.py). So a sequence is taken only while it is less than ``SEQUENCES_KEPT``
above the oldest unresolved one of its queue: at most ``SEQUENCES_KEPT - 1`` sequences exist above any unresolved one,
the broker never drops one below it, and a resend reaching a new leader late is stored, not taken for a
duplicate (Kafka's ``max.in.flight.requests.per.connection <= 5`` with idempotence, per queue here).

``WindowState`` is the bookkeeping (no locks, no I/O); ``SendWindow`` waits for a slot on the event loop
(``Producer``), ``BlockingSendWindow`` in a thread (``BlockingProducer``); ``select_with_room`` prefers a queue
with a free slot among those a send may take.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque

from graymq.client.message import MessageQueue
from graymq.core.route import TopicRoute
from graymq.core.selector import GrayQueueSelector, Side
from graymq.protocol.constants import SEQUENCES_KEPT
from graymq.protocol.errors import RequestTimeoutError

QueueKey = tuple[str, str, int]  # broker name, topic, queue id


def queue_key(mq: MessageQueue) -> QueueKey:
    return (mq.broker_name, mq.topic, mq.queue_id)


class _Queue:
    """One queue's numbering: the next sequence, the unresolved ones and the oldest of them (``next`` if none)."""

    __slots__ = ("next", "open", "oldest")

    def __init__(self) -> None:
        self.next = 0
        self.open: set[int] = set()
        self.oldest = 0


class WindowState:
    """The sequences per queue; ``size`` (``SEQUENCES_KEPT``) bounds the span from the oldest unresolved one.

    >>> w = WindowState(size=2)
    >>> key = ("b", "T", 0)
    >>> w.take_now(key), w.take_now(key), w.take_now(key)
    (0, 1, None)
    >>> w.release(key, 0); w.take_now(key)
    2
    """

    def __init__(self, size: int = SEQUENCES_KEPT) -> None:
        self.size = size
        self._queues: dict[QueueKey, _Queue] = {}

    def has_room(self, key: QueueKey, sequence: int | None = None) -> bool:
        """Whether ``key``'s next sequence (or the caller's ``sequence``, a pinned send's) may be taken now."""
        q = self._queues.get(key)
        if q is None or not q.open:
            return True
        if sequence is None:  # the usual case: the next number, above every unresolved one
            return q.next - q.oldest < self.size
        return max(max(q.open), sequence) - min(q.oldest, sequence) < self.size and sequence not in q.open

    def take_now(self, key: QueueKey, sequence: int | None = None) -> int | None:
        """The sequence taken (the queue's next, or ``sequence``), or ``None`` when the window is full."""
        q = self._queues.get(key)
        if q is None:
            q = self._queues[key] = _Queue()
        if sequence is None:  # the usual case, checked here without a call
            if q.open and q.next - q.oldest >= self.size:
                return None
            sequence = q.next
            q.next += 1
        elif not self.has_room(key, sequence):
            return None
        q.oldest = min(q.oldest, sequence) if q.open else sequence
        q.open.add(sequence)
        return sequence

    def release(self, key: QueueKey, sequence: int) -> None:
        """``sequence`` of ``key`` resolved: its send ended, or moved to another queue."""
        q = self._queues[key]
        q.open.discard(sequence)
        if sequence == q.oldest:
            q.oldest = min(q.open) if q.open else q.next

    def unresolved(self, key: QueueKey) -> int:
        q = self._queues.get(key)
        return len(q.open) if q is not None else 0


def _full(key: QueueKey) -> RequestTimeoutError:
    return RequestTimeoutError(f"send to {key[1]} queue {key[2]} of {key[0]} timed out waiting for one of the "
                               f"{SEQUENCES_KEPT} sends in flight to that queue to end")


class SendWindow(WindowState):
    """For one event loop: the senders waiting for a full queue line up (a future each, first come first served);
    a release wakes the first, which leaves the line with a sequence (waking the next while room is left) or stays
    first. Nothing is made for a send that finds room and nobody waiting."""

    def __init__(self, size: int = SEQUENCES_KEPT) -> None:
        super().__init__(size)
        self._waiters: dict[QueueKey, deque[asyncio.Future[None]]] = {}

    def take_now(self, key: QueueKey, sequence: int | None = None, again: bool = False) -> int | None:
        """As ``WindowState.take_now``, behind the senders waiting for ``key`` unless the send takes ``again``
        (it held a sequence until its attempt failed: it keeps its place)."""
        if not again and self._waiters.get(key):
            return None
        return super().take_now(key, sequence)

    async def take(self, key: QueueKey, deadline: float, sequence: int | None = None) -> int:
        """A sequence of ``key`` once the window has room, by ``deadline`` (monotonic) or ``RequestTimeoutError``."""
        loop = asyncio.get_running_loop()
        waiters = self._waiters.setdefault(key, deque())
        turn: asyncio.Future[None] = loop.create_future()
        waiters.append(turn)
        try:
            while (taken := await self._turn(key, turn, deadline, sequence)) is None:
                turn = waiters[0] = loop.create_future()  # no room after all (a release above the oldest): still first
        except BaseException as exc:
            first = waiters[0] is turn
            waiters.remove(turn)
            if first:  # perhaps woken as it gave up: the turn goes on
                self._wake(key)
            if isinstance(exc, TimeoutError):
                raise _full(key) from None
            raise
        waiters.popleft()
        if self.has_room(key):
            self._wake(key)
        return taken

    async def _turn(self, key: QueueKey, turn: asyncio.Future[None], deadline: float,
                    sequence: int | None) -> int | None:
        """Wait to be woken as the first in line, then try to take."""
        await asyncio.wait_for(turn, deadline - time.monotonic())
        return super().take_now(key, sequence)

    def release(self, key: QueueKey, sequence: int) -> None:
        super().release(key, sequence)
        self._wake(key)

    def _wake(self, key: QueueKey) -> None:
        """The first sender waiting for ``key``, if any, tries again."""
        waiters = self._waiters.get(key)
        if waiters and not waiters[0].done():
            waiters[0].set_result(None)


class BlockingSendWindow(WindowState):
    """Shared by threads: every change under one ``threading.Condition``, a release wakes the waiters."""

    def __init__(self, size: int = SEQUENCES_KEPT) -> None:
        super().__init__(size)
        self._lock = threading.Lock()  # taken directly on the send path: a Condition's with is two Python calls
        self._changed = threading.Condition(self._lock)
        self._waiting = 0

    def take_now(self, key: QueueKey, sequence: int | None = None, again: bool = False) -> int | None:
        with self._lock:
            return super().take_now(key, sequence)

    def take(self, key: QueueKey, deadline: float, sequence: int | None = None) -> int:
        """A sequence of ``key`` once the window has room, by ``deadline`` (monotonic) or ``RequestTimeoutError``."""
        with self._changed:
            self._waiting += 1
            try:
                if not self._changed.wait_for(lambda: super(BlockingSendWindow, self).has_room(key, sequence),
                                              max(deadline - time.monotonic(), 0.0)):
                    raise _full(key)
                taken = super().take_now(key, sequence)
            finally:
                self._waiting -= 1
        assert taken is not None
        return taken

    def release(self, key: QueueKey, sequence: int) -> None:
        with self._lock:
            super().release(key, sequence)
            if self._waiting:
                self._changed.notify_all()


def select_with_room(selector: GrayQueueSelector, window: WindowState, route: TopicRoute, gray: Side,
                     gray_switch: bool, avoid_broker: str | None, sharding_key: str | None) -> MessageQueue:
    """The selector's queue, or when its window is full another the selector picks (same side, away from
    ``avoid_broker`` as it chooses) with room; the first one when none has (the send then waits for it). A send
    ordered by ``sharding_key`` keeps its queue."""
    first = selector.select(route, gray, gray_switch=gray_switch, last_broker=avoid_broker, sharding_key=sharding_key)
    if sharding_key is not None or window.has_room(queue_key(first)):
        return first
    for _ in range(len(selector.candidates(route, gray, gray_switch)) - 1):
        mq = selector.select(route, gray, gray_switch=gray_switch, last_broker=avoid_broker)
        if window.has_room(queue_key(mq)):
            return mq
    return first
