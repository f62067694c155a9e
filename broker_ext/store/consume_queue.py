"""Consume queues: per (topic, queue id), where each message of the queue sits in the commit log.

Files live in ``consumequeue/<topic>/<queue_id>/``, each holding ``units_per_file`` units and
named by its start byte offset; queue offset n is unit n. Units are appended in commit-log
order, so their physical offsets never decrease and can be binary-searched.

A *hole* (size ``HOLE_SIZE``) is a unit whose message is lost: its record was found damaged (by
recovery or by a read), or a rebuild found no record for that queue offset. Readers skip holes;
queue offsets of later messages never move. A hole keeps a physical offset that preserves the
order (the damaged record's, the next record's for a gap, -1 before the first record of a rebuilt
queue). Unwritten units are all zero; a written unit never has size 0.

Opened ``read_only`` (``graymq broker verify``), files are mapped for reading and nothing is changed.
"""

from __future__ import annotations

import bisect
import logging
import shutil
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

from graymq.broker_ext.store.mapped_file import MappedFile, file_name, list_files

log = logging.getLogger(__name__)

# One unit: commit-log offset int64, record size int32 (HOLE_SIZE: message lost), tag hash int64.
UNIT = struct.Struct(">qiq")
HOLE_SIZE = -1


class ConsumeQueue:
    """The unit files of one (topic, queue id); ``[min_offset, max_offset)`` are the readable offsets."""

    def __init__(self, directory: Path, topic: str, queue_id: int, units_per_file: int,
                 read_only: bool = False) -> None:
        self.directory = directory
        self.topic = topic
        self.queue_id = queue_id
        self.units_per_file = units_per_file
        self.read_only = read_only
        self.file_bytes = units_per_file * UNIT.size
        self.files: list[MappedFile] = []
        self.min_offset = 0
        self.max_offset = 0
        self._active: MappedFile | None = None
        self._pos = self.file_bytes  # write position in _active; file_bytes means "find the next file"
        self._synced = 0
        self._rewrites = 0  # set_unit and truncate calls, so a sync running meanwhile does not count them as synced
        self._dirty = threading.Lock()  # guards _synced and _rewrites between the loop thread and a syncing thread

    def load(self) -> None:
        """Map the files and find the end of the written units (binary search on the last file)."""
        for start, path in list_files(self.directory):
            if start % self.file_bytes or (self.files and start != self.files[-1].end):
                log.warning("consume queue %s/%d: file %s out of sequence, rebuilding the queue from the log",
                            self.topic, self.queue_id, path)
                if self.read_only:
                    self.close()
                else:
                    self.delete_files()
                return
            self.files.append(MappedFile(path, start, self.file_bytes, self.read_only))
        while self.files:
            last = self.files[-1]
            written = bisect.bisect_left(range(self.units_per_file), True, key=lambda i: self._size_in(last, i) == 0)
            if written or len(self.files) == 1:
                self.max_offset = (last.start + written * UNIT.size) // UNIT.size
                break
            unused = self.files.pop()  # created ahead of a batch that never came
            if self.read_only:
                unused.close()
            else:
                unused.delete()
        if self.files:
            self.min_offset = self.files[0].start // UNIT.size
        self._synced = self.max_offset

    @staticmethod
    def _size_in(file: MappedFile, i: int) -> int:
        return UNIT.unpack_from(file.mm, i * UNIT.size)[1]

    def _file_of(self, offset: int) -> MappedFile:
        return self.files[(offset * UNIT.size - self.files[0].start) // self.file_bytes]

    def has_unit(self, offset: int) -> bool:
        """Whether unit ``offset`` is written and mapped (retention deletes whole files below the log's start)."""
        return bool(self.files) and self.files[0].start // UNIT.size <= offset < self.max_offset

    def unit(self, offset: int) -> tuple[int, int, int]:
        """(physical offset, size, tag hash) of unit ``offset``; it must be in the mapped files."""
        file = self._file_of(offset)
        return UNIT.unpack_from(file.mm, offset * UNIT.size - file.start)

    def units(self, start: int, count: int) -> Iterator[tuple[int, int, int]]:
        """Units ``[start, start + count)``, unpacked straight from the mapping file by file."""
        if count <= 0:
            return iter(())
        file = self._file_of(start)
        pos = start * UNIT.size - file.start
        end = pos + count * UNIT.size
        if end <= self.file_bytes:  # the usual case (every pull): one file, no generator of ours in between
            return UNIT.iter_unpack(file.view[pos:end])
        return self._units_across_files(start, count)

    def _units_across_files(self, start: int, count: int) -> Iterator[tuple[int, int, int]]:
        end = start + count
        while start < end:
            file = self._file_of(start)
            pos = start * UNIT.size - file.start
            n = min(end - start, (self.file_bytes - pos) // UNIT.size)
            yield from UNIT.iter_unpack(file.view[pos : pos + n * UNIT.size])
            start += n

    def first_at_or_after(self, physical_offset: int) -> int:
        """The first queue offset whose unit points at or after ``physical_offset`` (``max_offset`` if none)."""
        lo = self.files[0].start // UNIT.size if self.files else self.max_offset
        return bisect.bisect_left(range(lo, self.max_offset), physical_offset, key=lambda i: self.unit(i)[0]) + lo

    def prepare(self, count: int) -> None:
        """Create files for the next ``count`` units, so dispatching a batch cannot fail half-way."""
        end = (self.max_offset + count) * UNIT.size
        while not self.files or self.files[-1].end < end:
            if self.files:
                start = self.files[-1].end
            else:
                self.directory.mkdir(parents=True, exist_ok=True)
                start = self.max_offset * UNIT.size - self.max_offset * UNIT.size % self.file_bytes
            self.files.append(MappedFile(self.directory / file_name(start), start, self.file_bytes))

    def append(self, physical_offset: int, size: int, tag_hash: int) -> None:
        """Write unit ``max_offset`` (its file exists: see ``prepare``)."""
        pos = self._pos
        if pos == self.file_bytes:
            self._active = self._file_of(self.max_offset)
            pos = self.max_offset * UNIT.size - self._active.start
        UNIT.pack_into(self._active.mm, pos, physical_offset, size, tag_hash)  # type: ignore[union-attr]
        self._pos = pos + UNIT.size
        self.max_offset += 1

    def append_units(self, units: bytes | bytearray) -> None:
        """Write the packed ``units`` from ``max_offset`` on, a copy per file they span (files exist: ``prepare``)."""
        view = memoryview(units)
        while view:
            pos = self._pos
            if pos == self.file_bytes:
                self._active = self._file_of(self.max_offset)
                pos = self.max_offset * UNIT.size - self._active.start
            n = min(len(view), self.file_bytes - pos)
            self._active.mm[pos:pos + n] = view[:n]  # type: ignore[union-attr]
            self._pos = pos + n
            self.max_offset += n // UNIT.size
            view = view[n:]

    def put_unit(self, queue_offset: int, physical_offset: int, size: int, tag_hash: int) -> None:
        """Recovery's idempotent write: skip an offset already present, fill a gap before it with holes."""
        if queue_offset < self.max_offset:
            return
        gap_offset = physical_offset
        if not self.files:
            # A rebuilt queue starts in the file holding its first surviving message.
            gap_offset = -1
            self.max_offset = self.min_offset = queue_offset - queue_offset % self.units_per_file
            self._active, self._pos = None, self.file_bytes
        self.prepare(queue_offset + 1 - self.max_offset)
        while self.max_offset < queue_offset:
            self.append(gap_offset, HOLE_SIZE, 0)
        self.append(physical_offset, size, tag_hash)

    def truncate(self, queue_offset: int) -> None:
        """Drop units ``[queue_offset, max_offset)``."""
        if queue_offset >= self.max_offset:
            return
        file = self._file_of(queue_offset)
        index = self.files.index(file)
        pos = queue_offset * UNIT.size - file.start
        written_end = min(self.file_bytes, self.max_offset * UNIT.size - file.start)
        file.mm[pos:written_end] = bytes(written_end - pos)
        for dropped in self.files[index + 1 :]:
            dropped.delete()
        del self.files[index + 1 :]
        self.max_offset = queue_offset
        self.min_offset = min(self.min_offset, queue_offset)
        self._active, self._pos = None, self.file_bytes
        self._note_rewrite(queue_offset)

    def set_unit(self, offset: int, physical_offset: int, size: int, tag_hash: int) -> None:
        """Rewrite the written unit ``offset`` (a repair, or ``HOLE_SIZE`` for a lost message)."""
        file = self._file_of(offset)
        UNIT.pack_into(file.mm, offset * UNIT.size - file.start, physical_offset, size, tag_hash)
        self._note_rewrite(offset)

    def _note_rewrite(self, offset: int) -> None:
        with self._dirty:
            self._synced = min(self._synced, offset)
            self._rewrites += 1

    def delete_below(self, physical_offset: int) -> None:
        """Forget units whose records are below the commit log's min offset (whole files are deleted)."""
        while (
            len(self.files) > 1
            and self.files[0].end <= self.max_offset * UNIT.size
            and self.unit(self.files[0].end // UNIT.size - 1)[0] < physical_offset
        ):
            self.files.pop(0).delete()
        self.min_offset = self.first_at_or_after(physical_offset)

    def sync(self) -> None:
        """fdatasync the files holding units written since the last sync (worker thread). A unit rewritten
        meanwhile (``set_unit``, ``truncate``) stays for the next sync."""
        with self._dirty:
            start, end, rewrites = self._synced, self.max_offset, self._rewrites
        if end <= start:
            return
        for file in list(self.files):
            if file.end > start * UNIT.size and file.start < end * UNIT.size:
                file.sync()
        with self._dirty:
            self._synced = end if self._rewrites == rewrites else min(self._synced, start)

    def delete_files(self) -> None:
        for file in self.files:
            file.delete()
        self.files.clear()
        self.min_offset = self.max_offset = 0
        self._active, self._pos = None, self.file_bytes

    def close(self) -> None:
        for file in self.files:
            file.close()
        self.files.clear()


class ConsumeQueues:
    """Every consume queue of a store, keyed by (topic, queue id)."""

    def __init__(self, directory: Path, units_per_file: int, read_only: bool = False) -> None:
        self.directory = directory
        self.units_per_file = units_per_file
        self.read_only = read_only
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}

    def load(self) -> None:
        if self.read_only and not self.directory.is_dir():
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        for topic_dir in sorted(p for p in self.directory.iterdir() if p.is_dir()):
            for queue_dir in sorted(p for p in topic_dir.iterdir() if p.is_dir() and p.name.isdigit()):
                queue = self.create(topic_dir.name, int(queue_dir.name))
                queue.load()

    def get(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.queues.get((topic, queue_id))

    def create(self, topic: str, queue_id: int) -> ConsumeQueue:
        queue = ConsumeQueue(self.directory / topic / str(queue_id), topic, queue_id, self.units_per_file,
                             self.read_only)
        self.queues[(topic, queue_id)] = queue
        return queue

    def table(self) -> dict[str, dict[int, int]]:
        """topic -> queue id -> max offset."""
        table: dict[str, dict[int, int]] = {}
        for (topic, queue_id), queue in self.queues.items():
            table.setdefault(topic, {})[queue_id] = queue.max_offset
        return table

    def truncate_past(self, end: int) -> None:
        """Drop units pointing at or past ``end``, the commit log's end after recovery."""
        for queue in self.queues.values():
            queue.truncate(queue.first_at_or_after(end))

    def delete_below(self, physical_offset: int) -> None:
        for queue in self.queues.values():
            queue.delete_below(physical_offset)

    def delete_topic(self, topic: str) -> int:
        """Delete every queue of ``topic`` with its files and directory; returns how many there were."""
        keys = [key for key in self.queues if key[0] == topic]
        for key in keys:
            self.queues.pop(key).delete_files()
        shutil.rmtree(self.directory / topic, ignore_errors=True)
        return len(keys)

    def sync(self) -> None:
        for queue in list(self.queues.values()):
            queue.sync()

    def close(self) -> None:
        for queue in self.queues.values():
            queue.close()

    def remove_empty_dirs(self) -> None:
        """Drop directories of queues that hold no file (never written or rebuilt as empty)."""
        for key, queue in list(self.queues.items()):
            if not queue.files and queue.max_offset == 0:
                del self.queues[key]
                shutil.rmtree(queue.directory, ignore_errors=True)
