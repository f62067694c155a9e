"""Consume queues and key index checked against the commit log, over the range a log scan covers.

Neither carries a CRC; the commit log is the truth. ``StoreCheck`` is the sink of a log scan
(log_scan.py) and, for every sound record, checks that unit ``queue_offset`` of its queue holds its
physical offset, size and tag hash; units of the scanned range that no sound record claims (a
damaged record's, stray ones) must be holes, units past the log end must not exist. Per segment,
key-index entries must point at sound record starts, and records after the last entry get theirs.

Records of a deleted topic (deleted_topics.py) are passed over: they have no units to check or rebuild.

With ``repair`` (recovery) whatever disagrees is rewritten as the log says, missing units and
entries are added; without it (``graymq broker verify``) it is only reported. Either way each
problem is a ``Finding``.
"""

from __future__ import annotations

import bisect
from array import array
from dataclasses import dataclass
from typing import Any

from graymq.broker_ext.store.commitlog import RecordHeader, record_tags, record_topic
from graymq.broker_ext.store.consume_queue import HOLE_SIZE, ConsumeQueue, ConsumeQueues
from graymq.broker_ext.store.deleted_topics import DeletedTopics
from graymq.broker_ext.store.index_file import ENTRY, KeyIndex, index_entries
from graymq.broker_ext.store.log_scan import Hole
from graymq.broker_ext.store.mapped_file import MappedFile, file_name
from graymq.protocol.constants import tag_hash
from graymq.protocol.record import decode_record

UNIT_MISSING = "unit missing for a sound record"
UNIT_DISAGREES = "unit disagrees with its record"
UNIT_STRAY = "unit points at no sound record (made a hole)"
UNIT_PAST_END = "unit points past the log end"
OFFSET_REPEATED = "a second record has this queue offset (ignored)"
ENTRY_STRAY = "entries point at no sound record"
ENTRIES_MISSING = "records after the last entry have none"


@dataclass(slots=True)
class Finding:
    """``count`` consume-queue units or key-index entries found wrong in ``file`` (relative to the store
    directory), from ``first``: a queue offset for a consume queue, a commit-log offset for the index."""

    file: str
    first: int
    count: int
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "first": self.first, "count": self.count, "reason": self.reason}


class StoreCheck:
    """A log scan's sink (see the module doc): ``holes`` are the scan's, ``findings`` the checks'."""

    def __init__(self, queues: ConsumeQueues, index: KeyIndex, scan_start: int, repair: bool,
                 deleted: DeletedTopics | None = None) -> None:
        self.queues = queues
        self.deleted = deleted
        self.index = index
        self.scan_start = scan_start
        self.repair = repair
        self.holes: list[Hole] = []
        self.findings: list[Finding] = []
        self.last_store_timestamp = 0
        self._matched: dict[tuple[str, int], tuple[int, int]] = {}  # queue -> last (queue offset, physical offset)
        self._starts = array("q")  # sound record starts of the segment being scanned
        self._scanned: set[int] = set()  # segment starts

    # ----------------------------------------------------------------- scan sink

    def hole(self, hole: Hole) -> None:
        self.holes.append(hole)

    def record(self, segment: MappedFile, pos: int, header: RecordHeader) -> None:
        physical_offset = segment.start + pos
        self._starts.append(physical_offset)
        self.last_store_timestamp = header.store_timestamp
        view = segment.view
        key = (record_topic(view, pos, header), header.queue_id)
        if self.deleted is not None and self.deleted.deleted(key[0], physical_offset):
            return
        queue_offset = header.queue_offset
        matched = self._matched.get(key)
        if matched is not None and queue_offset <= matched[0]:
            self._note(_queue_file(*key), queue_offset, 1, OFFSET_REPEATED)
            return
        self._matched[key] = (queue_offset, physical_offset)
        queue = self.queues.get(*key)
        if queue is None:
            if not self.repair:
                self._note(_queue_file(*key), queue_offset, 1, UNIT_MISSING)
                return
            queue = self.queues.create(*key)
        low = matched[0] + 1 if matched else self._first_in_scan(queue)
        self._strays(queue, low, min(queue_offset, queue.max_offset), matched[1] if matched else self.scan_start,
                     physical_offset)
        size = header.total_size
        hashed = tag_hash(record_tags(view[pos : pos + size]))
        if queue_offset >= queue.max_offset:
            first = max(low, queue.max_offset)
            self._note(_queue_file(*key), first, queue_offset + 1 - first, UNIT_MISSING)
            if self.repair:
                queue.put_unit(queue_offset, physical_offset, size, hashed)
        elif queue.has_unit(queue_offset) and queue.unit(queue_offset) != (physical_offset, size, hashed):
            self._note(_queue_file(*key), queue_offset, 1, UNIT_DISAGREES)
            if self.repair:
                queue.set_unit(queue_offset, physical_offset, size, hashed)

    def segment_end(self, segment: MappedFile) -> None:
        """Check the segment's key-index entries against its sound records; add the missing ones."""
        starts, self._starts = self._starts, array("q")
        self._scanned.add(segment.start)
        file = self.index.files.get(segment.start)
        name = f"index/{file_name(segment.start)}"
        last = -1
        if file is not None:
            entries = file.read_entries()
            bad = []
            for i, (_, physical_offset, _) in enumerate(ENTRY.iter_unpack(entries)):
                if physical_offset < self.scan_start:
                    continue
                if _contains(starts, physical_offset):
                    last = max(last, physical_offset)
                else:
                    bad.append(i)
            if bad:
                first_bad = ENTRY.unpack_from(entries, bad[0] * ENTRY.size)[1]
                self._note(name, first_bad, len(bad), ENTRY_STRAY)
                if self.repair:
                    dropped = set(bad)
                    file.rewrite(b"".join(entries[i * ENTRY.size : (i + 1) * ENTRY.size]
                                          for i in range(len(entries) // ENTRY.size) if i not in dropped))
        missing = []
        for physical_offset in starts[bisect.bisect_right(starts, last):]:
            message = decode_record(segment.view, physical_offset - segment.start, verify_crc=False)
            entry = index_entries(message.topic, message.properties, physical_offset, message.store_timestamp)
            if entry:
                missing.append((physical_offset, entry))
        if missing:
            self._note(name, missing[0][0], len(missing), ENTRIES_MISSING)
            if self.repair:
                self.index.add(segment.start, b"".join(entry for _, entry in missing))

    # ----------------------------------------------------------------- after the scan

    def finish(self, end: int) -> None:
        """Check the units after each queue's last sound record (holes up to ``end``, the log end, none past it)
        and the index files of no scanned segment (none past ``end``)."""
        for key, queue in list(self.queues.queues.items()):
            matched = self._matched.get(key)
            low = max(matched[0] + 1 if matched else self._first_in_scan(queue), queue.min_offset)
            cut = queue.max_offset
            while cut > low and queue.unit(cut - 1)[0] >= end:
                cut -= 1
            self._strays(queue, low, cut, matched[1] if matched else self.scan_start, end)
            if cut < queue.max_offset:
                self._note(_queue_file(*key), cut, queue.max_offset - cut, UNIT_PAST_END)
                if self.repair:
                    queue.truncate(cut)
        for start, file in sorted(self.index.files.items()):
            if start >= self.scan_start and start not in self._scanned and file.size:
                self._note(f"index/{file_name(start)}", start, file.size // ENTRY.size, ENTRY_STRAY)
        if self.repair:
            self.index.truncate_from(end)

    # ----------------------------------------------------------------- helpers

    def _first_in_scan(self, queue: ConsumeQueue) -> int:
        """The first unit of ``queue`` pointing into the scanned range."""
        return queue.first_at_or_after(self.scan_start) if queue.files else queue.max_offset

    def _strays(self, queue: ConsumeQueue, low: int, high: int, floor: int, ceiling: int) -> None:
        """Units ``[low, high)`` claim records the scan did not find there: each becomes a hole, keeping its physical
        offset if it lies in ``[floor, ceiling]`` (the records around it) so the queue stays ordered, else ``floor``."""
        for queue_offset in range(max(low, queue.min_offset), high):
            physical_offset, size, _ = queue.unit(queue_offset)
            if size == HOLE_SIZE:
                continue
            self._note(_queue_file(queue.topic, queue.queue_id), queue_offset, 1, UNIT_STRAY)
            if self.repair:
                kept = physical_offset if floor <= physical_offset <= ceiling else floor
                queue.set_unit(queue_offset, kept, HOLE_SIZE, 0)

    def _note(self, file: str, first: int, count: int, reason: str) -> None:
        """Add a finding, merged into the previous one when it continues it."""
        last = self.findings[-1] if self.findings else None
        if last is not None and (last.file, last.reason) == (file, reason) and (
                reason in (ENTRY_STRAY, ENTRIES_MISSING) or last.first + last.count == first):
            last.count += count
        else:
            self.findings.append(Finding(file, first, count, reason))


def _queue_file(topic: str, queue_id: int) -> str:
    return f"consumequeue/{topic}/{queue_id}"


def _contains(starts: array[int], physical_offset: int) -> bool:
    i = bisect.bisect_left(starts, physical_offset)
    return i < len(starts) and starts[i] == physical_offset
