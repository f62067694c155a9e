"""The commit log: every record of every topic, appended to fixed-size segments.

Segments live in ``commitlog/`` and are named by their start offset; physical offsets are
global, so segment k covers ``[k * segment_size, (k + 1) * segment_size)``. A record never
straddles two segments: when a batch does not fit in the active segment, the rest of it is
marked with an end-of-segment marker and the batch goes to the next segment. Records use the
``graymq.protocol.record`` layout unchanged, so a read returns stored bytes as they go on the wire.

Reads go through the segments' mappings, and every page read stays mapped, counted in the broker's
resident set, until released: after every ``RELEASE_EVERY`` bytes served, the mapped pages of every
segment are handed back (``MappedFile.release_pages``). The data stays in the kernel's page cache, so
the next read of a released page costs a minor fault, not a disk read; the broker's RSS stays bounded
however much of the log consumers and followers read.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import NamedTuple

from graymq.broker_ext.store.mapped_file import MappedFile, file_name, list_files
from graymq.protocol.constants import PROPERTY_TAGS
from graymq.protocol.crc import crc32
from graymq.protocol.errors import MessageTooLargeError
from graymq.protocol.record import CRC_START, MAX_RECORD_SIZE, RECORD_HEADER, RECORD_MAGIC, find_property

# The first 8 bytes of a record (total_size uint32, magic uint32: the leading fields of
# RECORD_HEADER) and of the end-of-segment marker (bytes left in the segment uint32, BLANK_MAGIC).
# A segment whose tail has fewer than 8 bytes left needs no marker: readers treat it as ended.
SIZE_AND_MAGIC = struct.Struct(">II")
BLANK_MAGIC = 0xBBCCDDEE
# RECORD_HEADER's trailing length fields (topic, born host, store host, body, properties) and where they start.
_LENGTHS = struct.Struct(">" + RECORD_HEADER.format[-5:])
_LENGTHS_AT = RECORD_HEADER.size - _LENGTHS.size
_HEADER_SIZE = RECORD_HEADER.size
RELEASE_EVERY = 32 << 20  # bytes served through the mappings between two releases of their pages
_unpack_header = RECORD_HEADER.unpack_from
# RECORD_HEADER's leading fields, total_size to physical_offset: what a read checks besides the CRC.
_unpack_check = struct.Struct(">" + RECORD_HEADER.format[1:8]).unpack_from


class RecordHeader(NamedTuple):
    """RECORD_HEADER's fields by name."""

    total_size: int
    magic: int
    crc32: int
    queue_id: int
    sys_flag: int
    queue_offset: int
    physical_offset: int
    born_timestamp: int
    store_timestamp: int
    reconsume_times: int
    topic_len: int
    born_host_len: int
    store_host_len: int
    body_len: int
    properties_len: int


def read_header(buf: memoryview, pos: int = 0) -> RecordHeader:
    return RecordHeader._make(RECORD_HEADER.unpack_from(buf, pos))


def record_topic(buf: memoryview, pos: int, header: RecordHeader) -> str:
    start = pos + RECORD_HEADER.size
    return str(buf[start : start + header.topic_len], "utf-8")


def frame_fields(buf: memoryview, pos: int, physical_offset: int, room: int) -> tuple[int, ...] | str:
    """RECORD_HEADER's fields of the record at ``pos`` of ``buf`` if it is sound, else why it is not.

    Sound: the magic, a size within ``room`` (the bytes left where it lies), field lengths adding up to it,
    the physical-offset field equal to ``physical_offset`` (where it lies in the log) and the CRC. Checked
    cheapest first, so a chance match of the magic bytes costs no CRC.
    """
    if room < _HEADER_SIZE:
        return f"{room} bytes left, a record header needs {_HEADER_SIZE}"
    fields = _unpack_header(buf, pos)
    total, magic = fields[0], fields[1]
    if magic != RECORD_MAGIC:
        return f"bad magic 0x{magic:08x}"
    if not _HEADER_SIZE <= total <= room or total > MAX_RECORD_SIZE:
        return f"size {total} out of range"
    if _HEADER_SIZE + fields[10] + fields[11] + fields[12] + fields[13] + fields[14] != total:
        return f"field lengths do not add up to the size {total}"
    if fields[6] != physical_offset:
        return f"physical offset field {fields[6]} is not the record's offset {physical_offset}"
    crc = crc32(buf[pos + CRC_START : pos + total])
    if crc != fields[2]:
        return f"CRC mismatch (stored 0x{fields[2]:08x}, computed 0x{crc:08x})"
    return fields


def damaged_record_start(buf: memoryview, pos: int, physical_offset: int, room: int, size: int) -> int | None:
    """The length to record as a hole when the bytes at ``pos`` start a record of ``physical_offset`` that is not
    sound, ``None`` when no record of that offset starts there (a consume-queue unit pointing there is wrong).

    A record start: the magic or the physical-offset field right (one damaged field leaves the other). The length
    is the record's size field if it fits in ``room``, else ``size`` (the unit's) clamped to ``[0, room]``.
    """
    if room < _HEADER_SIZE or not isinstance(frame_fields(buf, pos, physical_offset, room), str):
        return None
    fields = _unpack_header(buf, pos)
    if fields[1] != RECORD_MAGIC and fields[6] != physical_offset:
        return None
    return fields[0] if _HEADER_SIZE <= fields[0] <= room else min(max(size, 0), room)


def unit_damage(record: memoryview, physical_offset: int, queue_id: int, queue_offset: int) -> str | None:
    """Why ``record`` — the bytes a consume-queue unit points at — is not that unit's sound record; ``None``
    when it is: size, magic, queue id, queue offset and physical offset as the unit says, and the CRC.

    The read path's check, once per record served: one short unpack and a CRC over a view (no copy). The
    field lengths are not added up: they lie in the CRC's range, so a matching CRC vouches for them.
    """
    if len(record) >= _HEADER_SIZE:
        total, magic, crc, record_queue_id, _, record_queue_offset, record_physical_offset = _unpack_check(record)
        if (total == len(record) and magic == RECORD_MAGIC and record_queue_id == queue_id
                and record_queue_offset == queue_offset and record_physical_offset == physical_offset
                and crc32(record[CRC_START:]) == crc):
            return None
    fields = frame_fields(record, 0, physical_offset, len(record))
    if isinstance(fields, str):
        return fields
    if fields[0] != len(record):
        return f"size {fields[0]}, the consume queue says {len(record)}"
    return (f"the record is queue {fields[3]} offset {fields[5]}, "
            f"the consume queue says queue {queue_id} offset {queue_offset}")


def record_tags(record: memoryview) -> str:
    """The TAGS property of a stored record, without decoding its body or its other properties."""
    topic_len, born_len, store_len, body_len, props_len = _LENGTHS.unpack_from(record, _LENGTHS_AT)
    start = RECORD_HEADER.size + topic_len + born_len + store_len + body_len
    return find_property(bytes(record[start : start + props_len]), PROPERTY_TAGS)


class CommitLog:
    """Segments of ``segment_size`` bytes under ``directory``; ``max_offset`` is where the next record goes."""

    def __init__(self, directory: Path, segment_size: int, read_only: bool = False) -> None:
        self.directory = directory
        self.segment_size = segment_size
        self.read_only = read_only
        self.segments: list[MappedFile] = []
        self.max_offset = 0
        self._served = 0  # bytes read through the mappings since their pages were last released

    def load(self) -> None:
        """Map the existing segments; the write position is set by recovery (``truncate`` / ``set_end``)."""
        if not self.read_only:
            self.directory.mkdir(parents=True, exist_ok=True)
        for start, path in list_files(self.directory):
            expected = self.segments[-1].end if self.segments else start - start % self.segment_size
            if start != expected:
                raise ValueError(
                    f"commit log segment {path} does not start at {expected}: "
                    f"a segment is missing or segment_size ({self.segment_size}) was changed"
                )
            self.segments.append(MappedFile(path, start, self.segment_size, self.read_only))
        if self.segments:
            self.max_offset = self.segments[-1].end

    @property
    def min_offset(self) -> int:
        return self.segments[0].start if self.segments else self.max_offset

    def room_left(self) -> int:
        """Bytes that still fit in the active segment."""
        return self.segments[-1].end - self.max_offset if self.segments else 0

    def roll(self, needed: int) -> None:
        """Open the next segment for a batch of ``needed`` bytes, sealing the active one with the marker."""
        if needed > self.segment_size:
            raise MessageTooLargeError(
                f"{needed} bytes do not fit in a commit log segment of {self.segment_size} bytes"
            )
        start = self.segments[-1].end if self.segments else self.max_offset
        segment = MappedFile(self.directory / file_name(start), start, self.segment_size)
        if self.segments:
            active = self.segments[-1]
            pos = self.max_offset - active.start
            left = active.size - pos
            if left >= SIZE_AND_MAGIC.size:
                active.write(pos, SIZE_AND_MAGIC.pack(left, BLANK_MAGIC))
            active.seal()
        self.segments.append(segment)
        self.max_offset = start

    def append(self, data: bytes) -> None:
        """Write ``data`` at the end of the active segment in one ``pwrite`` (room checked by the caller)."""
        segment = self.segments[-1]
        segment.write(self.max_offset - segment.start, data)
        self.max_offset += len(data)

    def segment_for(self, offset: int) -> MappedFile | None:
        segments = self.segments
        if not segments or offset < segments[0].start or offset >= self.max_offset:
            return None
        return segments[(offset - segments[0].start) // self.segment_size]

    def record_view(self, offset: int, size: int) -> memoryview | None:
        """Zero-copy view of the ``size`` bytes at ``offset`` (unchecked: see ``unit_damage``); ``None`` unless
        they lie inside one segment, below the log end."""
        segment = self.segment_for(offset)
        if segment is None or offset + size > min(self.max_offset, segment.end):
            return None
        pos = offset - segment.start
        return segment.view[pos : pos + size]

    def served(self, size: int) -> None:
        """Count ``size`` bytes read through the mappings; past ``RELEASE_EVERY``, release the mapped pages."""
        self._served += size
        if self._served >= RELEASE_EVERY:
            self._served = 0
            for segment in self.segments:
                segment.release_pages()

    def read_record(self, offset: int) -> bytes | None:
        """A copy of the record at ``offset`` after checking magic, size, CRC and its physical offset."""
        segment = self.segment_for(offset)
        if segment is None:
            return None
        pos = offset - segment.start
        fields = frame_fields(segment.view, pos, offset, min(self.max_offset, segment.end) - offset)
        if isinstance(fields, str):
            return None
        return bytes(segment.view[pos : pos + fields[0]])

    def store_timestamp(self, offset: int) -> int | None:
        """Store timestamp of the record at ``offset`` (header only, not CRC-checked)."""
        segment = self.segment_for(offset)
        if segment is None or offset + RECORD_HEADER.size > segment.end:
            return None
        header = read_header(segment.view, offset - segment.start)
        return header.store_timestamp if header.magic == RECORD_MAGIC else None

    def flush(self, start: int, end: int) -> None:
        """fdatasync every segment holding bytes of ``[start, end)``; runs in a worker thread."""
        for segment in list(self.segments):
            if segment.end > start and segment.start < end:
                segment.sync()

    def set_end(self, end: int) -> list[int]:
        """Make ``end`` the write position; segments starting after it are deleted (their starts returned)."""
        keep = sum(1 for s in self.segments if s.start <= end)
        dropped = self.segments[keep:]
        del self.segments[keep:]
        for segment in dropped:
            segment.delete()
        self.max_offset = end
        return [s.start for s in dropped]

    def truncate(self, end: int) -> list[int]:
        """``set_end`` and discard whatever follows ``end`` in its segment (a torn tail, garbage)."""
        dropped = self.set_end(end)
        if self.segments and end < self.segments[-1].end:
            self.segments[-1].zero_from(end - self.segments[-1].start)
        return dropped

    def delete_oldest(self) -> int:
        """Delete the oldest segment; returns its start offset."""
        segment = self.segments.pop(0)
        segment.delete()
        return segment.start

    def close(self) -> None:
        for segment in self.segments:
            segment.close()
        self.segments.clear()
