"""Idempotent sends: per (producer id, topic, queue id), where the last few requests of a producer were stored.

A producer instance (a random 64-bit id) numbers its requests per (broker, topic, queue) and repeats the
number when it retries a request whose outcome it does not know (a timeout, a connection lost after the
write). ``lookup`` tells the send processor what became of a request's sequence number:

- a ``Stored`` result: one of the last ``SEQUENCES_KEPT`` stored; the retry is answered with it, nothing stored;
- ``FORGOTTEN``: at or below the highest sequence dropped from the entry, and not kept: stored before, where
  is no longer known; answered as a duplicate without offsets;
- ``None``: never stored: store it, then ``record`` it.

Sequences may have gaps (a request refused before it was written goes to another broker under a new
number) and may arrive out of order (retries of requests lost together with a connection). An entry keeps
the ``SEQUENCES_KEPT`` *highest* stored sequences and, as ``floor``, the highest one it dropped: every stored
sequence above ``floor`` is kept, so one above ``floor`` and not kept was never stored.

``FORGOTTEN`` is answered only for a request that was stored, because of the client's bound
(client/send_window.py): a producer takes a sequence of a queue only while it is less than ``SEQUENCES_KEPT``
above the oldest sequence it may still send there (unresolved: not answered, stopped, or moved to another queue
after a failure that stored nothing). Take that oldest unresolved sequence ``s``: every sequence of the queue
above ``s`` is at most ``s + SEQUENCES_KEPT - 1``, so at most 4 are stored above it. ``floor`` is a stored
sequence with ``SEQUENCES_KEPT`` stored ones above it, hence ``floor < s`` unless ``s`` itself was stored and
dropped (``floor == s``): a resend of ``s`` arriving late — after newer sequences, at a new leader — is stored or
answered as stored, never taken for a duplicate it is not. A client without that bound (more than
``SEQUENCES_KEPT`` sequences in flight per queue) can lose an acknowledged message this way.

Memory is bounded by producers × queues, not by the message rate: whenever an entry is made, those unused for
``WINDOW_S`` leave, and at most ``MAX_ENTRIES`` stay (the least recently used leave first). A retry arriving after its
entry left is stored again: at least once, as a request without a producer id always is. A producer id may be
given rather than drawn (the Spark sink derives one per query and partition, so another attempt of a task is
recognised as the same producer).

The table survives a restart: a request's first record carries ``PROPERTY_PRODUCER_SEQUENCE``
(``<producer id hex>:<sequence>:<messages>``) and ``rebuild`` reads it back from the records stored within
``WINDOW_S`` (``MessageStore.scan_recent``).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from graymq.broker_ext.store import MessageStore
from graymq.protocol.constants import PROPERTY_MSG_ID, PROPERTY_PRODUCER_SEQUENCE, SEQUENCES_KEPT
from graymq.protocol.record import RECORD_HEADER, find_property

log = logging.getLogger(__name__)

# SEQUENCES_KEPT (protocol/constants.py): per (producer, topic, queue), as Kafka keeps the last 5 batches per producer
# and partition
# An entry unused this long leaves; rebuild reads the records stored this far back. Long enough for a Spark
# sink's micro-batch to be run again after its driver restarts from the checkpoint (client/spark/sink_task.py).
WINDOW_S = 300.0
MAX_ENTRIES = 20_000  # (producer, topic, queue) entries, up to about 2 KiB each: 40 MiB at most
_unpack_header = RECORD_HEADER.unpack_from
_HEADER_SIZE = RECORD_HEADER.size


class Stored(NamedTuple):
    """Where one request was stored."""

    sequence: int
    queue_offset: int  # of its first message
    commit_log_offset: int  # of its first record
    end_offset: int  # after its last record: what an answer under sync flush waits for
    messages: int
    msg_id: str  # of its first message: a retry must carry the same


FORGOTTEN = Stored(-1, -1, -1, 0, 0, "")
_Key = tuple[int, str, int]  # producer id, topic, queue id


class _Sequences:
    """One entry: the highest stored sequences, ascending, and the highest dropped one."""

    __slots__ = ("kept", "floor", "used_at")

    def __init__(self, used_at: float) -> None:
        self.kept: list[Stored] = []
        self.floor = -1
        self.used_at = used_at


def sequence_property(producer_id: int, sequence: int, messages: int) -> str:
    """The value of ``PROPERTY_PRODUCER_SEQUENCE`` on a request's first record."""
    return f"{producer_id:x}:{sequence}:{messages}"


def parse_sequence_property(value: str) -> tuple[int, int, int] | None:
    """(producer id, sequence, messages) of a ``PROPERTY_PRODUCER_SEQUENCE`` value; ``None`` when malformed."""
    parts = value.split(":")
    if len(parts) != 3:
        return None
    try:
        producer_id, sequence, messages = int(parts[0], 16), int(parts[1]), int(parts[2])
    except ValueError:
        return None
    if producer_id <= 0 or sequence < 0 or messages < 1:
        return None
    return producer_id, sequence, messages


@dataclass(frozen=True, slots=True)
class RebuildResult:
    records: int  # records read
    requests: int  # requests found and entered
    entries: int  # entries in the table afterwards
    seconds: float


class ProducerTable:
    """The entries, least recently used first. Pure: no I/O but ``rebuild``; ``clock`` is injectable."""

    def __init__(self, window_s: float = WINDOW_S, max_entries: int = MAX_ENTRIES, kept: int = SEQUENCES_KEPT,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.window_s = window_s
        self.max_entries = max_entries
        self.kept = kept
        self._clock = clock
        self._entries: OrderedDict[_Key, _Sequences] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, producer_id: int, topic: str, queue_id: int, sequence: int) -> Stored | None:
        """What became of ``sequence`` (see the module doc): a ``Stored``, ``FORGOTTEN`` or ``None``."""
        entry = self._entries.get((producer_id, topic, queue_id))
        if entry is None or sequence > entry.kept[-1].sequence:  # the usual case: the next number
            return None
        for stored in entry.kept:
            if stored.sequence == sequence:
                return stored
        return FORGOTTEN if sequence <= entry.floor else None

    def record(self, producer_id: int, topic: str, queue_id: int, stored: Stored, used_at: float | None = None) -> None:
        """Enter a request just stored (``used_at``: when, on the table's clock; now by default). A new entry
        first makes room: entries idle for the window leave, then the least recently used beyond the cap."""
        when = self._clock() if used_at is None else used_at
        key = (producer_id, topic, queue_id)
        entry = self._entries.get(key)
        if entry is None:
            self._expire(self._clock(), room=1)
            entry = self._entries[key] = _Sequences(when)
        else:
            if when > entry.used_at:
                entry.used_at = when
            self._entries.move_to_end(key)
        kept = entry.kept
        if not kept or stored.sequence > kept[-1].sequence:  # the usual case: the next number
            kept.append(stored)
        else:
            at = next(i for i, s in enumerate(kept) if s.sequence >= stored.sequence)
            if kept[at].sequence == stored.sequence:
                kept[at] = stored
            else:
                kept.insert(at, stored)
        if len(kept) > self.kept:
            entry.floor = max(entry.floor, kept.pop(0).sequence)

    def _expire(self, now: float, room: int = 0) -> None:
        """Drop entries unused for the window, and the least recently used until ``room`` more fit the cap."""
        entries = self._entries
        horizon = now - self.window_s
        limit = self.max_entries - room
        while entries:
            key, oldest = next(iter(entries.items()))
            if oldest.used_at >= horizon and len(entries) <= limit:
                return
            del entries[key]

    # ------------------------------------------------------------------ restart

    def rebuild(self, store: MessageStore, now_ms: int | None = None) -> RebuildResult:
        """Make the table what the log holds: the requests whose first record was stored within the window (call
        after the store's load, and whenever the log changed under it: copied from a leader, or moved aside —
        an entry the log no longer holds would answer a retry as stored)."""
        began = time.perf_counter()
        now_ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        now = self._clock()
        requests = 0
        self._entries.clear()

        def visit(record: memoryview) -> int:
            nonlocal requests
            (_, _, _, queue_id, _, queue_offset, physical_offset, _, store_timestamp, reconsume_times,
             topic_len, born_len, store_len, body_len, props_len) = _unpack_header(record)
            if reconsume_times:  # a consumer's retry or a dead letter: a copy, not a producer's request
                return 1
            start = _HEADER_SIZE + topic_len + born_len + store_len + body_len
            properties = bytes(record[start : start + props_len])
            value = find_property(properties, PROPERTY_PRODUCER_SEQUENCE)
            parsed = parse_sequence_property(value) if value else None
            if parsed is None:
                return 1
            producer_id, sequence, messages = parsed
            topic = str(record[_HEADER_SIZE : _HEADER_SIZE + topic_len], "utf-8")
            if self.lookup(producer_id, topic, queue_id, sequence) is None:  # the first copy is the request's
                stored = Stored(sequence, queue_offset, physical_offset, physical_offset + len(record), messages,
                                find_property(properties, PROPERTY_MSG_ID))
                self.record(producer_id, topic, queue_id, stored, now - max(now_ms - store_timestamp, 0) / 1000)
                requests += 1
            return messages  # the batch's other records follow in this queue: pass over them

        records = store.scan_recent(now_ms - int(self.window_s * 1000), visit)
        self._entries = OrderedDict(sorted(self._entries.items(), key=lambda item: item[1].used_at))
        self._expire(now)
        result = RebuildResult(records, requests, len(self._entries), time.perf_counter() - began)
        log.info("producer table rebuilt from the last %.0f s of the log: %d requests in %d records read, "
                 "%d entries, in %.3f s", self.window_s, requests, records, result.entries, result.seconds)
        return result
