"""Recovery at load: bring commit log, consume queues and key index back in line.

1. Where to scan from. Clean stop (no ``abort`` marker) and a checkpoint pointing into the last
   segment: nothing is scanned, the checkpoint's offset is the log end. After a crash: from the
   start of the segment holding the checkpoint's flushed offset, two segments further back to be
   safe. No checkpoint, or a consume queue shorter than the checkpoint says (its files were lost):
   from the start of the log; ``full`` (``graymq broker verify --repair``) too.
2. The scan (log_scan.py) validates every record. A damaged one (size, magic, field lengths,
   physical offset or CRC wrong) is a *hole*: the scan goes on at the next sound record, in the same
   segment or a later one, and keeps everything sound. Only a tail no sound record follows is cut
   (the rest of its segment zeroed, later segments deleted).
3. The consume-queue unit and index entries of every sound record scanned are checked against it
   and rebuilt where they disagree or are missing; units no sound record claims (a damaged record's)
   become holes, so no queue serves them and later queue offsets stay put (store_check.py).
4. Units and index entries pointing at or past the log end are dropped.

Records of deleted topics (deleted_topics.py) are not dispatched: a deleted topic stays deleted.

The holes found are returned; the store records, logs and counts them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from graymq.broker_ext.store.checkpoint import Checkpoint
from graymq.broker_ext.store.commitlog import CommitLog
from graymq.broker_ext.store.consume_queue import ConsumeQueues
from graymq.broker_ext.store.deleted_topics import DeletedTopics
from graymq.broker_ext.store.index_file import KeyIndex
from graymq.broker_ext.store.log_scan import Hole, TornTail, scan_log
from graymq.broker_ext.store.store_check import ENTRIES_MISSING, UNIT_MISSING, UNIT_PAST_END, Finding, StoreCheck

log = logging.getLogger(__name__)

SAFETY_SEGMENTS = 2  # segments scanned before the one holding the checkpoint offset
_EXPECTED_AFTER_A_CRASH = (UNIT_MISSING, ENTRIES_MISSING, UNIT_PAST_END)


@dataclass(frozen=True, slots=True)
class RecoveryResult:
    end_offset: int
    scanned_from: int | None  # None: nothing scanned (clean stop)
    holes: tuple[Hole, ...]
    torn_tail: TornTail | None
    findings: tuple[Finding, ...]  # consume-queue units and index entries repaired
    last_store_timestamp: int


def recover(
    commitlog: CommitLog, queues: ConsumeQueues, index: KeyIndex, checkpoint: Checkpoint | None, clean: bool,
    full: bool = False, deleted: DeletedTopics | None = None,
) -> RecoveryResult:
    """Run the steps above; the commit log's write position is the returned ``end_offset``."""
    if not commitlog.segments:
        commitlog.set_end(0)
        result = RecoveryResult(0, None, (), None, (), 0)
    else:
        start = commitlog.min_offset if full else _scan_start(
            commitlog, checkpoint, clean, _short_queues(queues, checkpoint))
        if start is not None:
            log.info("recovering the commit log from offset %d (clean stop: %s)", start, clean)
            return _scan(commitlog, queues, index, checkpoint, start, deleted)
        assert checkpoint is not None
        commitlog.set_end(checkpoint.commitlog_offset)
        result = RecoveryResult(checkpoint.commitlog_offset, None, (), None, (), checkpoint.timestamp_ms)
    queues.truncate_past(result.end_offset)
    index.truncate_from(result.end_offset)
    return result


def _scan(
    commitlog: CommitLog, queues: ConsumeQueues, index: KeyIndex, checkpoint: Checkpoint | None, start: int,
    deleted: DeletedTopics | None,
) -> RecoveryResult:
    """Steps 2 to 4 from ``start``."""
    check = StoreCheck(queues, index, start, repair=True, deleted=deleted)
    scan = scan_log(commitlog.segments, start, check)
    if scan.torn_tail is not None:
        log.warning("commit log: torn tail at %d (%s): cut", scan.end_offset, scan.torn_tail.reason)
    dropped = commitlog.truncate(scan.end_offset)
    if dropped:
        log.warning("commit log: deleted %d segment(s) after the end found at %d", len(dropped), scan.end_offset)
    check.finish(scan.end_offset)
    for finding in check.findings:
        log.log(logging.INFO if finding.reason in _EXPECTED_AFTER_A_CRASH else logging.WARNING,
                "%s: %d from %d: %s (repaired)", finding.file, finding.count, finding.first, finding.reason)
    last_store_timestamp = max(check.last_store_timestamp, checkpoint.timestamp_ms if checkpoint else 0)
    return RecoveryResult(scan.end_offset, start, tuple(check.holes), scan.torn_tail, tuple(check.findings),
                          last_store_timestamp)


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
