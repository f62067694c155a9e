"""Pop consumption on the broker's store: receive, ack, change invisible time, dead-letter.

``receive`` serves, queue by queue (rotating the start), first the messages whose invisible time ran out (again,
with ``delivery_attempt`` + 1; past the group's maximum attempts to the dead-letter queue instead), then new
ones; with nothing to serve it waits for an append to one of its queues (the broker's pull hold service), an ack
that frees a FIFO queue, or the next invisible time to run out, at most the request's timeout. A queue whose
lease a graymq push consumer of the group holds is skipped; a FIFO group gets one message in flight per queue.

An ack changes the state first, then waits for its journal line: it is answered once as durable as a message sent
to this broker (``flush`` sync: fsynced; async: written to the file, fsynced within the flush interval).
After a restart the journal's acks and floors (with the committed offsets) rebuild each queue: acked messages are
not handed out again; everything else from the committed offset on is delivered again (first attempt).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from graymq.broker_ext.groups.offset_manager import ConsumerOffsetManager
from graymq.broker_ext.pop.ack_journal import COMPACT_BYTES, AckJournal, QueueAcks, QueueKey, ack_line, replay
from graymq.broker_ext.pop.queue_state import InFlight, PopQueue
from graymq.broker_ext.pop.receipt import InvalidReceiptHandle, ReceiptHandle, ReceiptSigner
from graymq.broker_ext.processors.pull_hold import PullRequestHoldService
from graymq.broker_ext.store import GetStatus, MessageStore
from graymq.protocol.record import MessageExt, decode_record

MIN_WAIT_S = 0.05
DeadLetter = Callable[[str, MessageExt, int], None]  # (group, message, attempts made): store it in %DLQ%group
OwnerOf = Callable[[str, str, int], "str | None"]  # (group, topic, queue id) -> the push consumer holding its lease


class StaleReceiptHandle(InvalidReceiptHandle):
    """A handle this broker signed, of a delivery that is over: acked, delivered again since, or expired."""


@dataclass(frozen=True, slots=True)
class PopRequest:
    group: str
    topic: str
    queue_ids: tuple[int, ...]
    batch_size: int
    invisible_ms: int
    tags: frozenset[str] | None = None
    fifo: bool = False
    max_attempts: int = 16
    timeout_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Popped:
    """A message handed out: its signed receipt handle and attempt."""

    message: MessageExt
    receipt_handle: str
    attempt: int
    invisible_ms: int


class PopService:
    """The pop state of every (group, topic, queue) of this broker; see the module doc."""

    def __init__(self, store: MessageStore, offsets: ConsumerOffsetManager, holds: PullRequestHoldService,
                 signer: ReceiptSigner, dead_letter: DeadLetter, owner_of: OwnerOf,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._store = store
        self._offsets = offsets
        self._holds = holds
        self._signer = signer
        self._dead_letter = dead_letter
        self._owner_of = owner_of
        self._clock = clock
        self._queues: dict[QueueKey, PopQueue] = {}
        self._serials = itertools.count(time.time_ns() // 1000)  # unique across runs too
        self._rotation = itertools.count()
        self._wakers: dict[tuple[str, str], set[asyncio.Future[None]]] = {}
        self.journal: AckJournal | None = None
        # raises unless this broker may change consumption state (a broker set's leader within its lease)
        self.fence: Callable[[], None] = lambda: None

    def open_journal(self, path: Path, *, sync: bool = True, interval_s: float = 0.2,
                     compact_bytes: int = COMPACT_BYTES) -> None:
        """Rebuild the queues from the journal at ``path`` (with the committed offsets); acks go to it from now,
        fsynced before the answer (``sync``) or every ``interval_s``."""
        for key, acks in replay(path).items():
            floor = max(acks.floor, self._offsets.query(*key))
            if floor < 0:
                floor = self._store.get_min_offset(key[1], key[2])
            state = self._queues[key] = PopQueue(floor, floor)
            for offset in acks.offsets:
                state.ack(offset)
            self._offsets.commit(*key, state.committed)
        self.journal = AckJournal(path, self.snapshot, sync=sync, interval_s=interval_s, compact_bytes=compact_bytes)

    def snapshot(self) -> dict[QueueKey, QueueAcks]:
        """Each queue's committed offset and acks above it (what the journal compacts to)."""
        return {key: QueueAcks(q.committed, set(q.acked)) for key, q in self._queues.items()}

    def in_flight(self, group: str, topic: str, queue_id: int) -> int:
        """Messages of the queue handed out and not acked."""
        state = self._queues.get((group, topic, queue_id))
        return len(state.in_flight) if state else 0

    def busy(self, group: str, topic: str, queue_id: int) -> bool:
        """Pop consumers use the queue: messages in flight, or one handed out within its invisible time."""
        state = self._queues.get((group, topic, queue_id))
        return state is not None and (bool(state.in_flight) or state.visible_at > self._clock())

    def _queue(self, group: str, topic: str, queue_id: int) -> PopQueue:
        key = (group, topic, queue_id)
        state = self._queues.get(key)
        committed = self._offsets.query(group, topic, queue_id)
        if committed < 0:
            committed = self._store.get_min_offset(topic, queue_id)
        if state is None:
            state = self._queues[key] = PopQueue(committed, committed)
        elif state.idle and committed != state.committed:
            state.reset(committed)
        return state

    async def receive(self, request: PopRequest) -> list[Popped]:
        """Up to ``batch_size`` messages, waiting at most ``timeout_s`` for one."""
        self.fence()
        if not request.queue_ids:  # this client may receive from no queue here now: an empty answer at once
            return []
        deadline = self._clock() + request.timeout_s
        while True:
            popped = await self._pop_once(request)
            now = self._clock()
            if popped or now >= deadline:
                return popped
            wait = deadline - now
            expiries = [d for q in request.queue_ids if (s := self._queues.get((request.group, request.topic, q)))
                        and (d := s.earliest_deadline()) is not None]
            if expiries:  # at least MIN_WAIT_S: an expired message this request cannot take must not spin it
                wait = min(wait, max(MIN_WAIT_S, min(expiries) - now))
            await self._wait(request, wait)

    async def _wait(self, request: PopRequest, timeout_s: float) -> None:
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake(_: bool = True) -> None:
            if not woken.done():
                woken.set_result(None)

        for queue_id in request.queue_ids:
            self._holds.hold(request.topic, queue_id, timeout_s, wake)
        wakers = self._wakers.setdefault((request.group, request.topic), set())
        wakers.add(woken)
        try:
            await asyncio.wait_for(woken, timeout_s + 1.0)  # the holds time out first; this bounds it regardless
        except TimeoutError:
            pass
        finally:
            wakers.discard(woken)

    def _wake(self, group: str, topic: str) -> None:
        for woken in self._wakers.get((group, topic), ()):
            if not woken.done():
                woken.set_result(None)

    async def _pop_once(self, request: PopRequest) -> list[Popped]:
        ids = request.queue_ids
        start = next(self._rotation) % len(ids) if ids else 0
        popped: list[Popped] = []
        done: list[bytes] = []  # journal lines of messages dead-lettered
        for queue_id in ids[start:] + ids[:start]:
            if len(popped) >= request.batch_size:
                break
            if self._owner_of(request.group, request.topic, queue_id) is not None:
                continue  # a graymq push consumer holds its lease
            state = self._queue(request.group, request.topic, queue_id)
            key = (request.group, request.topic, queue_id)
            popped.extend(self._redeliver(key, state, request, request.batch_size - len(popped), done))
            if len(popped) < request.batch_size and not (request.fifo and state.in_flight):
                popped.extend(self._pop_new(key, state, request, request.batch_size - len(popped)))
        if done and self.journal is not None:
            await self.journal.append(done)
        return popped

    def _redeliver(self, key: QueueKey, state: PopQueue, request: PopRequest, room: int,
                   done: list[bytes]) -> list[Popped]:
        popped: list[Popped] = []
        for flight in state.expired(self._clock()):
            if len(popped) >= (1 if request.fifo else room):
                break
            message = self._read(key, flight.offset)
            if message is None:  # gone from the store (retention): nothing left to deliver
                state.ack(flight.offset)
                done.append(ack_line(key, flight.offset))
            elif flight.attempt >= request.max_attempts:
                self._dead_letter(key[0], message, flight.attempt)
                state.ack(flight.offset)
                done.append(ack_line(key, flight.offset))
            else:
                popped.append(self._hand_out(key, state, message, flight.attempt + 1, request.invisible_ms))
        if done:
            self._offsets.commit(*key, state.committed)
        return popped

    def _pop_new(self, key: QueueKey, state: PopQueue, request: PopRequest, room: int) -> list[Popped]:
        popped: list[Popped] = []
        while len(popped) < (1 if request.fifo else room):
            begin = state.next_offset
            result = self._store.get_messages(key[1], key[2], begin, (1 if request.fifo else room) - len(popped),
                                              request.tags)
            for raw in result.records:
                message = decode_record(raw)
                if message.queue_offset not in state.acked:  # acked before a restart: not handed out again
                    popped.append(self._hand_out(key, state, message, 1, request.invisible_ms))
            state.passed(result.next_begin_offset)
            if result.status is GetStatus.NO_NEW_MSG or state.next_offset <= begin:
                break
        self._offsets.commit(*key, state.committed)
        return popped

    def _read(self, key: QueueKey, offset: int) -> MessageExt | None:
        result = self._store.get_messages(key[1], key[2], offset, 1)
        if not result.records:
            return None
        message = decode_record(result.records[0])
        return message if message.queue_offset == offset else None

    def _hand_out(self, key: QueueKey, state: PopQueue, message: MessageExt, attempt: int,
                  invisible_ms: int) -> Popped:
        serial = next(self._serials)
        state.deliver(message.queue_offset, attempt, serial, self._clock() + invisible_ms / 1000)
        handle = ReceiptHandle(*key, message.queue_offset, attempt, serial, int(time.time() * 1000), invisible_ms)
        return Popped(message, self._signer.sign(handle), attempt, invisible_ms)

    def _current(self, group: str, topic: str, text: str) -> tuple[ReceiptHandle, PopQueue, InFlight]:
        """The delivery ``text`` names, or ``InvalidReceiptHandle`` (forged, another group's or topic's) /
        ``StaleReceiptHandle`` (acked, delivered again since, or its invisible time is over)."""
        handle = self._signer.verify(text)
        if (handle.group, handle.topic) != (group, topic):
            raise InvalidReceiptHandle(f"the receipt handle is of group {handle.group} and topic {handle.topic}, "
                                       f"not {group} and {topic}")
        state = self._queues.get((group, topic, handle.queue_id))
        flight = state.current(handle.offset, handle.serial, self._clock()) if state else None
        if state is None or flight is None:
            raise StaleReceiptHandle(f"the receipt handle of {topic}#{handle.queue_id}@{handle.offset} (attempt "
                                     f"{handle.attempt}) is stale: acked, delivered again since, or expired")
        return handle, state, flight

    async def ack(self, group: str, topic: str, receipt_handle: str) -> None:
        """Ack one delivery; returns once the ack is as durable as the journal's mode says."""
        self.fence()
        handle, state, _ = self._current(group, topic, receipt_handle)
        await self._done(handle, state)

    async def _done(self, handle: ReceiptHandle, state: PopQueue) -> None:
        key = (handle.group, handle.topic, handle.queue_id)
        state.ack(handle.offset)
        self._offsets.commit(*key, state.committed)
        self._wake(handle.group, handle.topic)
        if self.journal is not None:
            await self.journal.append([ack_line(key, handle.offset)])

    def change_invisible(self, group: str, topic: str, receipt_handle: str, invisible_ms: int) -> str:
        """The delivery stays invisible ``invisible_ms`` from now: a new handle (the old one is stale from now). Done
        at once, without a wait: an auto-renewal and the client's ack of the same delivery cannot interleave."""
        self.fence()
        handle, state, flight = self._current(group, topic, receipt_handle)
        flight.serial = next(self._serials)
        flight.deadline = self._clock() + invisible_ms / 1000
        state.visible_at = max(state.visible_at, flight.deadline)
        renewed = ReceiptHandle(group, topic, handle.queue_id, handle.offset, flight.attempt, flight.serial,
                                int(time.time() * 1000), invisible_ms)
        return self._signer.sign(renewed)

    async def forward_to_dead_letter(self, group: str, topic: str, receipt_handle: str) -> None:
        """The delivered message goes to ``%DLQ%group`` and counts as acked."""
        self.fence()
        handle, state, flight = self._current(group, topic, receipt_handle)
        message = self._read((group, topic, handle.queue_id), handle.offset)
        if message is not None:
            self._dead_letter(group, message, flight.attempt)
        await self._done(handle, state)

    async def close(self) -> None:
        for wakers in self._wakers.values():
            for woken in wakers:
                if not woken.done():
                    woken.set_result(None)
        if self.journal is not None:
            await self.journal.close()
