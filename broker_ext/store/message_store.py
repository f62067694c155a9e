"""The broker's message store: commit log, consume queues and key index, flushed, checkpointed,
recovered at load and cleaned by retention.

On disk under ``store_dir``: ``commitlog/`` (commitlog.py), ``consumequeue/<topic>/<queue_id>/``
(consume_queue.py), ``index/`` (index_file.py), ``checkpoint`` (checkpoint.py) and ``abort``,
present while the store is open and removed by a clean ``stop`` (recovery.py reads both), ``holes``
(holes.py), ``deleted_topics`` (deleted_topics.py) and ``lock`` (lock.py), held while the store is open.

Damage is never served and never silent: recovery turns damaged records into holes, and a read
checks every record it returns against its CRC and its unit (queue id, queue offset, physical
offset); a damaged one is skipped, its unit made a hole, logged at ERROR and counted in
``stats.damaged_records`` / ``damaged_bytes``.

A failed fsync (commit log, consume queues, key index, hole log, checkpoint) is fatal (fatal.py):
``fatal`` keeps it, nothing is fsynced again, and ``stop`` then leaves the ``abort`` marker.

Everything but fsync runs on the event loop thread: puts, reads and retention never race each
other; fsyncs and checkpoint writes run in worker threads (flush.py, background.py).
"""

from __future__ import annotations

import asyncio
import bisect
import enum
import logging
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NamedTuple, Protocol

from graymq.broker_ext.store.atomic_file import fsync_dir, write_atomic
from graymq.broker_ext.store.background import BlockingWork, cancel_and_wait
from graymq.broker_ext.store.checkpoint import Checkpoint
from graymq.broker_ext.store.commitlog import CommitLog, damaged_record_start, record_tags, unit_damage
from graymq.broker_ext.store.consume_queue import HOLE_SIZE, ConsumeQueue, ConsumeQueues
from graymq.broker_ext.store.deleted_topics import DeletedTopics
from graymq.broker_ext.store.dispatch import place_puts, queue_offsets
from graymq.broker_ext.store.fatal import FatalState
from graymq.broker_ext.store.flush import FlushService
from graymq.broker_ext.store.holes import HoleLog
from graymq.broker_ext.store.index_file import KeyIndex
from graymq.broker_ext.store.lock import StoreLock
from graymq.broker_ext.store.log_scan import Hole
from graymq.broker_ext.store.mapped_file import file_name
from graymq.broker_ext.store.recovery import RecoveryResult, recover
from graymq.broker_ext.store.retention import RetentionPolicy, disk_usage
from graymq.broker_ext.store.stats import StoreStats
from graymq.protocol.constants import tag_hash
from graymq.protocol.errors import ConfigError, DiskFullError, MessageTooLargeError
from graymq.protocol.names import check_topic_name
from graymq.protocol.record import MAX_RECORD_SIZE, decode_record, encode_puts

log = logging.getLogger(__name__)

MAX_QUEUE_ID = 65535
_NO_BOUND = 1 << 63  # past any commit-log offset
MAX_SCAN_UNITS = 2000  # consume-queue units one get_messages call may scan past the filter
NO_TIMESTAMP = 1 << 63


class StoreSettings(Protocol):
    """What the store reads of its settings, validated by their owner: ``StoreConfig`` for a store on its own
    (``graymq broker verify``, tests), the broker's ``BrokerSettings`` as is."""

    @property
    def store_dir(self) -> Path: ...
    @property
    def segment_size(self) -> int: ...
    @property
    def cq_units_per_file(self) -> int: ...
    @property
    def flush(self) -> Literal["async", "sync"]: ...
    @property
    def flush_interval_ms(self) -> int: ...
    @property
    def sync_flush_timeout_ms(self) -> int: ...
    @property
    def retention_hours(self) -> float: ...
    @property
    def disk_warn_ratio(self) -> float: ...
    @property
    def disk_critical_ratio(self) -> float: ...
    @property
    def max_message_size(self) -> int: ...
    @property
    def store_host(self) -> str: ...
    @property
    def checkpoint_interval_ms(self) -> int: ...
    @property
    def retention_interval_ms(self) -> int: ...


@dataclass(frozen=True)
class StoreConfig:
    store_dir: Path
    segment_size: int = 1 << 30  # commit log segment bytes
    cq_units_per_file: int = 300_000  # consume-queue units (20 bytes each) per file
    flush: Literal["async", "sync"] = "async"
    flush_interval_ms: int = 200  # async flush period (sync mode: idle flush period)
    sync_flush_timeout_ms: int = 5_000
    retention_hours: float = 72.0
    disk_warn_ratio: float = 0.75  # above: delete oldest segments even if young
    disk_critical_ratio: float = 0.90  # above: refuse writes with DiskFullError
    max_message_size: int = 4 * 1024 * 1024  # body bytes
    store_host: str = ""  # "host:port" stamped into records
    checkpoint_interval_ms: int = 1_000
    retention_interval_ms: int = 10_000

    def __post_init__(self) -> None:
        object.__setattr__(self, "store_dir", Path(self.store_dir))
        problems = []
        if self.segment_size < 4096:
            problems.append(f"segment_size {self.segment_size} < 4096")
        if self.cq_units_per_file < 1:
            problems.append(f"cq_units_per_file {self.cq_units_per_file} < 1")
        if self.flush not in ("async", "sync"):
            problems.append(f"flush {self.flush!r} is neither 'async' nor 'sync'")
        for name in ("flush_interval_ms", "sync_flush_timeout_ms", "checkpoint_interval_ms",
                     "retention_interval_ms", "retention_hours"):
            if getattr(self, name) <= 0:
                problems.append(f"{name} must be positive")
        if not 0 < self.disk_warn_ratio <= self.disk_critical_ratio <= 1:
            problems.append("need 0 < disk_warn_ratio <= disk_critical_ratio <= 1")
        if not 0 < self.max_message_size <= MAX_RECORD_SIZE // 2:
            problems.append(f"max_message_size must be in (0, {MAX_RECORD_SIZE // 2}]")
        if problems:
            raise ConfigError("invalid store config: " + "; ".join(problems))


@dataclass(slots=True)
class PutMessage:
    """One message to append; ``properties`` already include TAGS / KEYS / UNIQ_KEY."""

    topic: str
    queue_id: int
    body: bytes
    properties: dict[str, str]
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: str = ""
    reconsume_times: int = 0


class AppendResult(NamedTuple):
    """Where one message went. A named tuple, not a dataclass: one is made per message appended."""

    physical_offset: int  # where the record starts in the commit log
    size: int
    queue_offset: int
    store_timestamp: int
    end_offset: int  # physical_offset + size: what a sync send waits to be flushed


class GetStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass(slots=True)
class GetResult:
    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    records: list[bytes | memoryview]  # stored records (protocol.record layout), zero-copy views


class MessageStore:
    """Appends, reads, flushes and cleans messages of every topic of one broker.

    ``disk_usage`` measures the used fraction of the file system holding the store and
    ``clock_ms`` gives store timestamps (both injectable for tests). The critical-watermark guard
    of ``put_messages`` uses the last measurement, taken every ``checkpoint_interval_ms``, at every
    segment roll and by ``disk_usage_ratio()``.
    """

    def __init__(
        self, config: StoreSettings, *, disk_usage: Callable[[Path], float] = disk_usage,
        clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
    ) -> None:
        self.config = config
        store_dir = config.store_dir
        self.commitlog = CommitLog(store_dir / "commitlog", config.segment_size)
        self.queues = ConsumeQueues(store_dir / "consumequeue", config.cq_units_per_file)
        self.index = KeyIndex(store_dir / "index")
        self.holes = HoleLog(store_dir / "holes")
        self.deleted_topics = DeletedTopics(store_dir / "deleted_topics")
        self.stats = StoreStats()
        self._lock = StoreLock(store_dir)
        self.fatal = FatalState()
        self._flush = FlushService(
            self.commitlog, self.stats, sync=config.flush == "sync",
            interval_s=config.flush_interval_ms / 1000, timeout_s=config.sync_flush_timeout_ms / 1000,
            fatal=self.fatal,
        )
        self._retention = RetentionPolicy(config.retention_hours, config.disk_warn_ratio)
        self._disk_usage = disk_usage
        self._clock_ms = clock_ms
        self._disk_ratio = 0.0
        self._store_host = config.store_host.encode()
        self._record_limit = min(config.segment_size, MAX_RECORD_SIZE)
        self._last_store_timestamp = 0
        self._work = BlockingWork()
        self._maintenance: asyncio.Task[None] | None = None
        self._saved_state: tuple[int, dict[str, dict[int, int]]] | None = None
        self._checkpoint_path = store_dir / "checkpoint"
        self._abort_path = store_dir / "abort"
        # where reads for consumers stop: a sync-replicated broker's confirmed offset (set by the broker); None:
        # the log end
        self.readable_end: Callable[[], int] | None = None

    # ----------------------------------------------------------------- lifecycle

    def load(self, full_scan: bool = False) -> RecoveryResult:
        """Lock the directory, open the files and recover (recovery.py; ``full_scan``: the whole log); call before
        anything else. ``StoreLockedError`` when another process holds the store."""
        self.config.store_dir.mkdir(parents=True, exist_ok=True)
        self._lock.acquire()
        try:
            return self._load(full_scan)
        except BaseException:
            self._lock.release()
            raise

    def _load(self, full_scan: bool) -> RecoveryResult:
        clean = not self._abort_path.exists()
        checkpoint = Checkpoint.load(self._checkpoint_path)
        self.commitlog.load()
        self.queues.load()
        self.index.load()
        self.holes.load()
        self.deleted_topics.load()
        result = recover(self.commitlog, self.queues, self.index, checkpoint, clean, full=full_scan,
                         deleted=self.deleted_topics)
        for hole in result.holes:
            self._count_hole(hole, "recovery")
        if full_scan:
            for hole in self.holes.keep_confirmed(list(result.holes)):
                log.warning("recorded commit log hole at %d (%s) not found by a full scan: no longer recorded",
                            hole.physical_offset, hole.reason)
        min_offset = self.commitlog.min_offset
        self.queues.delete_below(min_offset)
        self.queues.remove_empty_dirs()
        self.index.delete_below(min_offset)
        self.holes.forget_below(min_offset)
        self.deleted_topics.forget_below(min_offset)
        self._last_store_timestamp = result.last_store_timestamp
        self._flush.flushed_offset = result.end_offset
        if result.scanned_from is not None:
            self.commitlog.flush(result.scanned_from, result.end_offset)
        self.index.write_buffered()
        self._sync_and_save(self._checkpoint())
        write_atomic(self._abort_path, b"")
        self.stats.segments = len(self.commitlog.segments)
        self.disk_usage_ratio()
        log.info("store %s loaded: commit log [%d, %d), %d queues, clean=%s",
                 self.config.store_dir, min_offset, result.end_offset, len(self.queues.queues), clean)
        return result

    async def start(self) -> None:
        """Start the flush loop (periodic flush or group commit) and the checkpoint/retention loop."""
        self._flush.start()
        self._maintenance = asyncio.get_running_loop().create_task(self._maintain(), name="graymq-store-maintenance")

    async def stop(self) -> None:
        """Stop the loops, flush everything, write the checkpoint, mark a clean stop, close the files.
        After a fatal failure only the files are closed: no fsync, and the ``abort`` marker stays."""
        await cancel_and_wait(self._maintenance)
        self._maintenance = None
        await self._work.drain()
        await self._flush.stop()
        if self.fatal.error is None:
            await self.write_checkpoint()
        self.commitlog.close()
        self.queues.close()
        self.index.close()
        if self.fatal.error is None:
            self._abort_path.unlink(missing_ok=True)
            fsync_dir(self.config.store_dir)
        self._lock.release()

    async def flush(self) -> None:
        """Make the commit log durable up to its current end now (one fsync round)."""
        await self._flush.flush()

    async def wait_flushed(self, end_offset: int) -> None:
        """Sync flush: resolve once the commit log is durable up to ``end_offset`` (group commit; needs
        ``start()``); raises ``FlushTimeoutError`` after ``sync_flush_timeout_ms``. Async flush: returns at once."""
        await self._flush.wait_flushed(end_offset)

    def flushed_future(self, end_offset: int) -> asyncio.Future[None] | None:
        """``wait_flushed`` as a plain future (no task, no coroutine); ``None`` when there is nothing to wait for."""
        return self._flush.flushed_future(end_offset)

    async def write_checkpoint(self) -> None:
        """Sync consume queues and key index, then save the checkpoint (checkpoint.py), off the loop. The index
        entries buffered so far are written first, here on the loop (puts fill that buffer), so the sync covers them."""
        self.index.write_buffered()
        await self._work.run(self._sync_and_save, self._checkpoint())

    def _checkpoint(self) -> Checkpoint:
        return Checkpoint(
            commitlog_offset=self._flush.flushed_offset,
            timestamp_ms=max(self._clock_ms(), self._last_store_timestamp),
            queue_offsets=self.queues.table(),
        )

    def _sync_and_save(self, checkpoint: Checkpoint) -> None:
        """Make queues and index durable, then the checkpoint describing them unless nothing changed
        since the last one (worker thread)."""
        self.queues.sync()
        self.index.sync()
        self.holes.save()
        state = (checkpoint.commitlog_offset, checkpoint.queue_offsets)
        if state != self._saved_state:
            checkpoint.save(self._checkpoint_path)
            self._saved_state = state

    async def _maintain(self) -> None:
        loop = asyncio.get_running_loop()
        next_retention = loop.time() + self.config.retention_interval_ms / 1000
        while True:
            await asyncio.sleep(self.config.checkpoint_interval_ms / 1000)
            try:
                await self.write_checkpoint()
            except OSError as exc:
                self.fatal.fail("syncing consume queues, key index and checkpoint", exc)
                return
            try:
                self.disk_usage_ratio()
                if loop.time() >= next_retention:
                    next_retention = loop.time() + self.config.retention_interval_ms / 1000
                    self.run_retention()
            except OSError:
                log.exception("store retention round failed; retrying next round")

    # ----------------------------------------------------------------- writes

    def put_messages(self, messages: Sequence[PutMessage]) -> list[AppendResult]:
        """Append ``messages`` contiguously (one copy into the commit log, never split across segments),
        assign queue offsets and dispatch to consume queues and key index before returning. No fsync.

        Everything is validated and encoded before the first byte is written, so a bad message
        fails the whole batch and leaves the store untouched. One call (``encode_puts``) writes the batch's
        records into one buffer; per batch, not per message: tag hashes, index seeds, the room check, one
        commit-log copy, one index write.
        """
        if not messages:
            return []
        if self._disk_ratio > self.config.disk_critical_ratio:
            raise DiskFullError(
                f"disk usage {self._disk_ratio:.1%} of {self.config.store_dir} is above the critical "
                f"watermark {self.config.disk_critical_ratio:.0%}: writes are refused"
            )
        store_timestamp = max(self._clock_ms(), self._last_store_timestamp)
        data, sizes, queue_offsets, batch_ends = self._encode(messages, self.commitlog.max_offset, store_timestamp)
        if len(data) > self.commitlog.room_left():
            self.commitlog.roll(len(data))
            self.stats.segments = len(self.commitlog.segments)
            self.disk_usage_ratio()
            data, sizes, queue_offsets, batch_ends = self._encode(messages, self.commitlog.max_offset,
                                                                  store_timestamp)
        start = self.commitlog.max_offset
        queues = {}
        for key, end in batch_ends.items():
            queue = self.queues.get(*key) or self.queues.create(*key)
            queue.prepare(end - queue.max_offset)
            queues[key] = queue
        segment_start = self.commitlog.segments[-1].start
        self.commitlog.append(data)
        self._flush.appended(start, self.commitlog.max_offset)

        units, entries, results = place_puts(messages, queue_offsets, sizes, start, store_timestamp, AppendResult)
        for key, block in units.items():
            queues[key].append_units(block)
        if entries:
            try:
                self.index.add(segment_start, entries)
            except OSError:
                log.exception("key index write failed at %d; these messages cannot be found by key", start)
        self._last_store_timestamp = store_timestamp
        self.stats.put_count += len(messages)
        self.stats.put_bytes += len(data)
        return results

    def _encode(
        self, messages: Sequence[PutMessage], start: int, store_timestamp: int
    ) -> tuple[bytes, list[int], list[int], dict[tuple[str, int], int]]:
        """Validate and encode the batch as if written at ``start``: the records end to end, each one's size and
        queue offset, and per queue the offset after the batch. Run again after a segment roll."""
        offsets, ends = queue_offsets(messages, self._next_queue_offset, self.config.max_message_size)
        try:
            data, sizes = encode_puts(messages, offsets, start, store_timestamp, self._store_host)
        except struct.error as exc:
            raise ValueError(f"a message of the batch has a field out of range: {exc}") from exc
        if max(sizes) > self._record_limit:
            i = next(i for i, size in enumerate(sizes) if size > self._record_limit)
            raise MessageTooLargeError(
                f"message {i} of the batch is a {sizes[i]}-byte record, over the {self._record_limit}-byte "
                f"limit (commit log segment size {self.config.segment_size})"
            )
        return data, sizes, offsets, ends

    def _next_queue_offset(self, topic: str, queue_id: int) -> int:
        """The offset a put to this queue gets next (0 for a queue not created yet, whose name is checked)."""
        queue = self.queues.get(topic, queue_id)
        if queue is None:
            _check_new_queue(topic, queue_id)
            return 0
        return queue.max_offset

    def delete_topic(self, topic: str) -> int:
        """Delete ``topic``'s consume queues, so nothing of it is served and a topic created again under that name
        starts empty; returns how many queues were deleted. The deletion is recorded first (deleted_topics.py), so
        recovery does not rebuild them; the records stay in the commit log until retention. A name no topic can
        have is ignored (0)."""
        if check_topic_name(topic):
            return 0
        self.deleted_topics.add(topic, self.commitlog.max_offset)
        deleted = self.queues.delete_topic(topic)
        log.info("topic %s deleted from the store: %d consume queue(s) removed", topic, deleted)
        return deleted

    # ----------------------------------------------------------------- reads

    def get_messages(
        self, topic: str, queue_id: int, offset: int, max_nums: int,
        tags: frozenset[str] | None = None, max_bytes: int = 4 << 20,
    ) -> GetResult:
        """Up to ``max_nums`` records of the queue from ``offset`` (see GetStatus for the outcomes).

        With ``tags``, units are filtered by tag hash, then records exactly by their TAGS property;
        skipped messages still advance ``next_begin_offset``. Holes and records gone are skipped; so is
        a damaged record (its CRC, or a header not matching its unit), after turning its unit into a hole
        (see the module doc). At most ``max(max_nums, MAX_SCAN_UNITS)`` units are scanned per call. Nothing
        from ``readable_end()`` (a record boundary) on is read: a queue whose next message is there has
        ``NO_NEW_MSG``.
        """
        if max_nums < 1:
            raise ValueError(f"max_nums must be at least 1, got {max_nums}")
        queue = self.queues.get(topic, queue_id)
        min_offset, max_offset = (queue.min_offset, queue.max_offset) if queue else (0, 0)
        if offset < min_offset or offset > max_offset:
            corrected = min_offset if offset < min_offset else max_offset
            return GetResult(GetStatus.OFFSET_ILLEGAL, corrected, min_offset, max_offset, [])
        if offset == max_offset or queue is None:
            return GetResult(GetStatus.NO_NEW_MSG, offset, min_offset, max_offset, [])

        hashes = {tag_hash(t) for t in tags} if tags else None
        commitlog = self.commitlog
        log_min = commitlog.min_offset
        readable_end = _NO_BOUND if self.readable_end is None else self.readable_end()
        records: list[bytes | memoryview] = []
        size_total = 0
        next_offset = offset
        for physical_offset, size, unit_tag_hash in queue.units(
            offset, min(max_offset - offset, max(max_nums, MAX_SCAN_UNITS))
        ):
            if physical_offset >= readable_end:  # the end is a record boundary (its size may be damaged)
                break
            if size > 0 and physical_offset >= log_min and (hashes is None or unit_tag_hash in hashes):
                record = commitlog.record_view(physical_offset, size)
                if record is None:
                    self._skip_damaged(queue, next_offset, physical_offset, size, "outside the commit log")
                elif (damage := unit_damage(record, physical_offset, queue_id, next_offset)) is not None:
                    self._skip_damaged(queue, next_offset, physical_offset, size, damage)
                elif tags is None or record_tags(record) in tags:
                    if records and size_total + size > max_bytes:
                        break
                    records.append(record)
                    size_total += size
            elif size <= 0 and size != HOLE_SIZE and physical_offset >= log_min:
                self._skip_damaged(queue, next_offset, physical_offset, size, f"unit size {size}")
            next_offset += 1
            if len(records) == max_nums:
                break
        if records:
            commitlog.served(size_total)
            return GetResult(GetStatus.FOUND, next_offset, min_offset, max_offset, records)
        status = GetStatus.NO_NEW_MSG if next_offset == offset else GetStatus.NO_MATCHED_MSG
        return GetResult(status, next_offset, min_offset, max_offset, records)

    def _skip_damaged(self, queue: ConsumeQueue, queue_offset: int, physical_offset: int, size: int,
                      reason: str) -> None:
        """A read found unit ``queue_offset`` pointing at no sound record of its own: make it a hole, log, count.
        Where a damaged record of that offset starts (``damaged_record_start``), it is a commit-log hole, recorded;
        anything else (a sound record not the unit's, the middle of a record, nothing) means the unit itself is
        wrong: counted in ``stats.bad_units``, the hole log untouched (``graymq broker verify --repair`` rebuilds
        the unit from the log)."""
        queue.set_unit(queue_offset, physical_offset, HOLE_SIZE, 0)
        where = f"consume queue {queue.topic}/{queue.queue_id} offset {queue_offset}"
        segment = self.commitlog.segment_for(physical_offset)
        if segment is not None:
            pos = physical_offset - segment.start
            room = min(self.commitlog.max_offset, segment.end) - physical_offset
            length = damaged_record_start(segment.view, pos, physical_offset, room, size)
            if length is not None:
                self._count_hole(Hole(f"commitlog/{file_name(segment.start)}", pos, length, reason, physical_offset),
                                 where)
                return
        self.stats.bad_units += 1
        log.error("%s points at commit log offset %d (%d bytes), where no record of its own starts: %s; the unit is "
                  "wrong and now a hole (graymq broker verify --repair rebuilds it)", where, physical_offset, size,
                  reason)

    def _count_hole(self, hole: Hole, found_by: str) -> None:
        """Record, log (ERROR unless already recorded) and count a hole of the commit log."""
        self.stats.damaged_records += 1
        self.stats.damaged_bytes += hole.length
        new = self.holes.add(hole)
        log.log(logging.ERROR if new else logging.WARNING,
                "commit log %s at %d found by %s: %s (%d bytes at offset %d of %s); its messages are lost and skipped",
                "hole" if new else "known hole", hole.physical_offset, found_by, hole.reason, hole.length, hole.offset,
                hole.file)

    def scan_recent(self, since_ms: int, visit: Callable[[memoryview], int]) -> int:
        """Call ``visit`` with every sound record stored at or after ``since_ms``, queue by queue in queue order
        (damaged ones are skipped as ``get_messages`` skips them); ``visit`` returns how many units to move on:
        1, or more to pass over the rest of a batch it has read. Returns the number of records visited."""
        visited = 0
        log_min = self.commitlog.min_offset
        for (topic, queue_id), queue in list(self.queues.queues.items()):
            start = max(self.get_offset_by_time(topic, queue_id, since_ms), queue.min_offset)
            skip = 0
            for queue_offset, (physical_offset, size, _) in enumerate(
                    queue.units(start, queue.max_offset - start), start):
                if skip:
                    skip -= 1
                elif size > 0 and physical_offset >= log_min:
                    record = self.commitlog.record_view(physical_offset, size)
                    if record is None:
                        self._skip_damaged(queue, queue_offset, physical_offset, size, "outside the commit log")
                    elif (damage := unit_damage(record, physical_offset, queue_id, queue_offset)) is not None:
                        self._skip_damaged(queue, queue_offset, physical_offset, size, damage)
                    else:
                        visited += 1
                        skip = visit(record) - 1
        return visited

    def get_min_offset(self, topic: str, queue_id: int) -> int:
        queue = self.queues.get(topic, queue_id)
        return queue.min_offset if queue else 0

    def get_max_offset(self, topic: str, queue_id: int) -> int:
        """The next queue offset to be written (0 for an unknown queue)."""
        queue = self.queues.get(topic, queue_id)
        return queue.max_offset if queue else 0

    def get_max_offset_below(self, topic: str, queue_id: int, end: int | None) -> int:
        """The queue's max offset counting only messages stored before commit-log offset ``end`` (a sync leader's
        confirmed offset: what consumers may read; None: every message). The walk back from the queue's end is as
        long as the unconfirmed tail, which the sync sends waiting on it bound."""
        queue = self.queues.get(topic, queue_id)
        if queue is None:
            return 0
        offset = queue.max_offset
        if end is None:
            return offset
        while offset > queue.min_offset and next(iter(queue.units(offset - 1, 1)))[0] >= end:
            offset -= 1
        return offset

    def get_offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first queue offset whose message was stored at or after ``timestamp_ms`` (max offset if none)."""
        queue = self.queues.get(topic, queue_id)
        if queue is None:
            return 0
        lo, hi = queue.min_offset, queue.max_offset
        return lo + bisect.bisect_left(
            range(lo, hi), timestamp_ms, key=lambda offset: self._stored_at(queue, offset)
        )

    def _stored_at(self, queue: ConsumeQueue, offset: int) -> int:
        """Store timestamp of the first readable message at or after ``offset`` (store times never decrease)."""
        for physical_offset, size, _ in queue.units(offset, queue.max_offset - offset):
            if size > 0:
                timestamp = self.commitlog.store_timestamp(physical_offset)
                if timestamp is not None:
                    return timestamp
        return NO_TIMESTAMP

    def read_record(self, physical_offset: int) -> bytes | None:
        """One record by commit-log offset, CRC-checked; ``None`` when absent or damaged."""
        return self.commitlog.read_record(physical_offset)

    def query_by_key(
        self, topic: str, key: str, max_num: int = 32, begin_ms: int = 0, end_ms: int = 2**62
    ) -> list[bytes]:
        """Records of ``topic`` with ``key`` among their keys or as their msg id, newest first."""
        found: list[bytes] = []
        seen = set()
        for physical_offset in self.index.candidates(topic, key, begin_ms, end_ms):
            if physical_offset in seen:
                continue
            seen.add(physical_offset)
            if self.deleted_topics.deleted(topic, physical_offset):
                continue
            record = self.commitlog.read_record(physical_offset)
            if record is None:
                continue
            message = decode_record(record)
            if message.topic == topic and (message.msg_id == key or key in message.keys):
                found.append(record)
                if len(found) >= max_num:
                    break
        return found

    def queue_table(self) -> dict[str, dict[int, int]]:
        """topic -> queue id -> max offset, for every consume queue."""
        return self.queues.table()

    @property
    def max_physical_offset(self) -> int:
        return self.commitlog.max_offset

    @property
    def min_physical_offset(self) -> int:
        return self.commitlog.min_offset

    @property
    def flushed_offset(self) -> int:
        return self._flush.flushed_offset

    # ----------------------------------------------------------------- retention

    def disk_usage_ratio(self) -> float:
        """Measure the used fraction of the store's file system now; also updates the write guard."""
        self._disk_ratio = self._disk_usage(self.config.store_dir)
        return self._disk_ratio

    def run_retention(self, now: float | None = None) -> int:
        """Delete the segments retention allows (retention.py); returns how many were deleted."""
        now = time.time() if now is None else now
        deleted = 0
        while reason := self._retention.reason_to_delete_oldest(
            self.commitlog.segments, self.flushed_offset, now, self.disk_usage_ratio
        ):
            start = self.commitlog.delete_oldest()
            self.index.delete(start)
            deleted += 1
            log.info("deleted commit log segment %d: %s", start, reason)
        if deleted:
            self.queues.delete_below(self.commitlog.min_offset)
            self.holes.forget_below(self.commitlog.min_offset)
            self.deleted_topics.forget_below(self.commitlog.min_offset)
            self.stats.deleted_segments += deleted
            self.stats.segments = len(self.commitlog.segments)
            self.disk_usage_ratio()
        return deleted


def _check_new_queue(topic: str, queue_id: int) -> None:
    problem = check_topic_name(topic)
    if problem:
        raise ValueError(problem)
    if not 0 <= queue_id <= MAX_QUEUE_ID:
        raise ValueError(f"queue id {queue_id} of topic {topic!r} is outside [0, {MAX_QUEUE_ID}]")
