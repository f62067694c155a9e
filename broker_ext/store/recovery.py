"""Recovery at load: bring commit log, consume queues and key index back in line.

1. Where to scan from. Clean stop (no ``abort`` marker) and a checkpoint pointing into the last
   segment: nothing is scanned, the checkpoint's offset is the log end. After a crash: from the
   start of the segment holding the checkpoint's flushed offset, two segments further back to be
   safe. No checkpoint, or a consume queue shorter than the checkpoint says (its files were lost):
   from the start of the log.
2. The scan validates every record (``check_record``: magic, size, CRC; and its physical offset
   must equal its position). The first bad magic or size is the torn tail: the log ends there,
   the rest of that segment is discarded and later segments deleted. A record framed correctly
   but failing its CRC, followed by a correct frame, is *damaged*: it is skipped and remembered.
3. Every valid record scanned is re-dispatched idempotently: its consume-queue unit is written if
   the queue does not have it yet (gaps become holes) and its index entries are written if they
   are past the last entry of its segment's index file.
4. Consume-queue units and index entries pointing at or past the log end are dropped; units of
   damaged records become holes, so no queue serves them and later queue offsets stay put.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from graymq.broker_ext.store.checkpoint import Checkpoint
from graymq.broker_ext.store.commitlog import (
    BLANK_MAGIC,
    SIZE_AND_MAGIC,
    CommitLog,
    RecordHeader,
    read_header,
    record_topic,
)
from graymq.broker_ext.store.consume_queue import ConsumeQueues
from graymq.broker_ext.store.index_file import KeyIndex, index_entries
from graymq.broker_ext.store.mapped_file import MappedFile
from graymq.protocol.constants import tag_hash
from graymq.protocol.errors import ProtocolError
from graymq.protocol.record import check_record, decode_record, record_size_at

log = logging.getLogger(__name__)

SAFETY_SEGMENTS = 2  # segments scanned before the one holding the checkpoint offset


@dataclass(frozen=True, slots=True)
class RecoveryResult:
    end_offset: int
    scanned_from: int | None  # None: nothing scanned (clean stop)
    damaged: tuple[int, ...]  # physical offsets of damaged records skipped
    last_store_timestamp: int


def recover(
    commitlog: CommitLog, queues: ConsumeQueues, index: KeyIndex, checkpoint: Checkpoint | None, clean: bool
) -> RecoveryResult:
    """Run the steps above; the commit log's write position is the returned ``end_offset``."""
    if not commitlog.segments:
        commitlog.set_end(0)
        result = RecoveryResult(0, None, (), 0)
    elif (start := _scan_start(commitlog, checkpoint, clean, _short_queues(queues, checkpoint))) is None:
        assert checkpoint is not None
        commitlog.set_end(checkpoint.commitlog_offset)
        result = RecoveryResult(checkpoint.commitlog_offset, None, (), checkpoint.timestamp_ms)
    else:
        log.info("recovering the commit log from offset %d (clean stop: %s)", start, clean)
        scan = _LogScan(commitlog, queues, index)
        end = scan.run(start)
        dropped = commitlog.truncate(end)
        if dropped:
            log.warning("commit log: deleted %d segment(s) after the end found at %d", len(dropped), end)
        last_ts = max(scan.last_store_timestamp, checkpoint.timestamp_ms if checkpoint else 0)
        result = RecoveryResult(end, start, tuple(scan.damaged), last_ts)
    queues.truncate_past(result.end_offset)
    if result.damaged:
        queues.mark_holes(set(result.damaged))
    index.truncate_from(result.end_offset)
    return result


def _short_queues(queues: ConsumeQueues, checkpoint: Checkpoint | None) -> list[tuple[str, int]]:
    """Queues holding fewer units on disk than the checkpoint recorded."""
    if checkpoint is None:
        return []
    short = []
    for topic, offsets in checkpoint.queue_offsets.items():
        for queue_id, recorded in offsets.items():
            queue = queues.get(topic, queue_id)
            if (queue.max_offset if queue else 0) < recorded:
                short.append((topic, queue_id))
    if short:
        log.warning("consume queues shorter than the checkpoint, rebuilding from the log: %s", short)
    return short


def _scan_start(
    commitlog: CommitLog, checkpoint: Checkpoint | None, clean: bool, short: list[tuple[str, int]]
) -> int | None:
    """Where the scan starts; ``None`` when the checkpoint can be trusted as the log end."""
    if checkpoint is None or short:
        return commitlog.min_offset
    offset = checkpoint.commitlog_offset
    last = commitlog.segments[-1]
    if clean and last.start <= offset <= last.end:
        return None
    size = commitlog.segment_size
    back = offset - offset % size - SAFETY_SEGMENTS * size
    return min(max(back, commitlog.min_offset), last.start)


def _is_boundary(view: memoryview, pos: int) -> bool:
    """Whether a record frame, an end-of-segment marker or the segment end starts at ``pos``."""
    if len(view) - pos < SIZE_AND_MAGIC.size or SIZE_AND_MAGIC.unpack_from(view, pos)[1] == BLANK_MAGIC:
        return True
    try:
        record_size_at(view, pos)
    except ProtocolError:
        return False
    return True


class _LogScan:
    """One pass over the records from an offset: validates, finds the end, re-dispatches what is missing."""

    def __init__(self, commitlog: CommitLog, queues: ConsumeQueues, index: KeyIndex) -> None:
        self.commitlog = commitlog
        self.queues = queues
        self.index = index
        self.damaged: list[int] = []
        self.last_store_timestamp = 0
        self._index_segment = -1
        self._index_last = -1

    def run(self, start: int) -> int:
        """Scan from ``start``; returns the end of the log."""
        segments = self.commitlog.segments
        i = (start - segments[0].start) // self.commitlog.segment_size
        pos = start - segments[i].start
        while True:
            segment = segments[i]
            pos, ended = self._scan_segment(segment, pos)
            if not ended or i + 1 == len(segments):
                return segment.start + pos
            i, pos = i + 1, 0

    def _scan_segment(self, segment: MappedFile, pos: int) -> tuple[int, bool]:
        """Scan one segment; returns (stop position, whether the segment ended normally)."""
        view = segment.view
        while segment.size - pos >= SIZE_AND_MAGIC.size:
            if SIZE_AND_MAGIC.unpack_from(view, pos)[1] == BLANK_MAGIC:
                return pos, True
            try:
                total = record_size_at(view, pos)
            except ProtocolError as exc:
                if SIZE_AND_MAGIC.unpack_from(view, pos) != (0, 0):
                    log.warning("commit log: end of valid data at %d: %s", segment.start + pos, exc)
                return pos, False
            try:
                check_record(view, pos)
            except ProtocolError as exc:
                if not _is_boundary(view, pos + total):
                    log.warning("commit log: torn record at %d: %s", segment.start + pos, exc)
                    return pos, False
                log.error("commit log: damaged record at %d skipped: %s", segment.start + pos, exc)
                self.damaged.append(segment.start + pos)
                pos += total
                continue
            header = read_header(view, pos)
            if header.physical_offset != segment.start + pos:
                log.warning("commit log: record at %d claims offset %d, treating it as the end",
                            segment.start + pos, header.physical_offset)
                return pos, False
            self._dispatch(segment, pos, header)
            pos += total
        return pos, True

    def _dispatch(self, segment: MappedFile, pos: int, header: RecordHeader) -> None:
        physical_offset = segment.start + pos
        self.last_store_timestamp = header.store_timestamp
        topic = record_topic(segment.view, pos, header)
        queue = self.queues.get(topic, header.queue_id) or self.queues.create(topic, header.queue_id)
        if segment.start != self._index_segment:
            self._index_segment, self._index_last = segment.start, self.index.last_offset(segment.start)
        need_unit = header.queue_offset >= queue.max_offset
        need_index = physical_offset > self._index_last
        if not (need_unit or need_index):
            return
        message = decode_record(segment.view, pos, verify_crc=False)
        if need_unit:
            queue.put_unit(header.queue_offset, physical_offset, header.total_size, tag_hash(message.tags))
        if need_index:
            entries = index_entries(topic, message.properties, physical_offset, header.store_timestamp)
            if entries:
                self.index.add(segment.start, entries)
