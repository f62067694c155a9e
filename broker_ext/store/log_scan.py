"""One pass over the commit log: every sound record, every hole, and where the log ends.

A record is sound when its size, magic, field lengths, physical-offset field and CRC agree
(``commitlog.frame_fields``). Anything else where a record should start opens a *hole*: the scan
looks for the next sound record, in the same segment and then in the following ones, and goes on
from there, so nothing sound after damage is ever dropped. Only when no sound record follows
anywhere is the rest the log's *tail*, where the log ends; a tail holding anything but zeros is
*torn* (a write cut short, garbage). A hole is reported per segment file it covers.

The search for the next record looks for the magic bytes with ``mmap.find``, only inside the file's
data extents (never-written preallocated space is skipped unread), and checks each match as a record
at that position: its physical-offset field makes a chance match practically impossible.

Recovery scans from a little before its checkpoint; ``graymq broker verify`` scans the whole log.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from graymq.broker_ext.store.commitlog import BLANK_MAGIC, SIZE_AND_MAGIC, RecordHeader, frame_fields
from graymq.broker_ext.store.mapped_file import MappedFile
from graymq.protocol.record import RECORD_MAGIC

_MAGIC_BYTES = struct.pack(">I", RECORD_MAGIC)
_MAGIC_AT = 4  # the magic follows the record's uint32 total size
_ZERO_CHUNK = bytes(1 << 20)


@dataclass(frozen=True, slots=True)
class Hole:
    """Bytes of the commit log where no sound record could be read: ``file`` (relative to the store
    directory) from ``offset`` for ``length`` bytes; ``reason`` is what was wrong at its start."""

    file: str
    offset: int
    length: int
    reason: str
    physical_offset: int

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "offset": self.offset, "length": self.length, "reason": self.reason,
                "physical_offset": self.physical_offset}


@dataclass(frozen=True, slots=True)
class TornTail:
    """Where the log ends with bytes that are neither a sound record nor zeros."""

    file: str
    offset: int
    reason: str
    physical_offset: int

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "offset": self.offset, "reason": self.reason,
                "physical_offset": self.physical_offset}


class ScanSink(Protocol):
    """What a scan reports, in log order."""

    def record(self, segment: MappedFile, pos: int, header: RecordHeader) -> None: ...

    def hole(self, hole: Hole) -> None: ...

    def segment_end(self, segment: MappedFile) -> None: ...


@dataclass(frozen=True, slots=True)
class ScanEnd:
    end_offset: int  # where the next record goes: right after the last sound record
    torn_tail: TornTail | None


def segment_file(segment: MappedFile) -> str:
    return f"commitlog/{segment.path.name}"


def scan_log(segments: Sequence[MappedFile], start: int, sink: ScanSink) -> ScanEnd:
    """Scan ``segments`` (the log, in order) from ``start``; report to ``sink``; return the end found."""
    first = next((i for i, s in enumerate(segments) if s.start <= start < s.start + s.size), len(segments))
    pending: list[_Piece] = []  # bad regions no sound record has followed yet, oldest first
    end = start
    for segment in segments[first:]:
        view = segment.view
        size = len(view)
        pos = start - segment.start if segment is segments[first] else 0
        while size - pos >= SIZE_AND_MAGIC.size:
            fields = frame_fields(view, pos, segment.start + pos, size - pos)
            if not isinstance(fields, str):
                for piece in pending:
                    sink.hole(piece.hole())
                pending.clear()
                sink.record(segment, pos, RecordHeader._make(fields))
                pos += fields[0]
                end = segment.start + pos
                continue
            if not pending and SIZE_AND_MAGIC.unpack_from(view, pos) == (size - pos, BLANK_MAGIC):
                break  # the end-of-segment marker
            if not pending or pending[-1].segment is not segment:
                pending.append(_Piece(segment, pos, size, fields))
            found = _next_sound(segment, pos)
            pending[-1].stop = size if found is None else found
            if found is None:
                break
            pos = found
        sink.segment_end(segment)
    if not pending:
        return ScanEnd(end, None)
    tail = pending[0]
    torn = next((p for p in pending if _holds_data(p.segment, p.begin)), None)
    return ScanEnd(tail.segment.start + tail.begin, None if torn is None else TornTail(
        segment_file(tail.segment), tail.begin, torn.reason, tail.segment.start + tail.begin))


@dataclass(slots=True)
class _Piece:
    """The part of a hole (or of the tail) inside one segment: ``[begin, stop)``."""

    segment: MappedFile
    begin: int
    stop: int
    reason: str

    def hole(self) -> Hole:
        return Hole(segment_file(self.segment), self.begin, self.stop - self.begin, self.reason,
                    self.segment.start + self.begin)


def _next_sound(segment: MappedFile, pos: int) -> int | None:
    """Where the first sound record after ``pos`` starts in ``segment``; ``None`` when none does."""
    view, mm = segment.view, segment.mm
    size = len(view)
    for lo, hi in segment.data_ranges(pos + 1, size):
        at = mm.find(_MAGIC_BYTES, max(lo, pos + 1) + _MAGIC_AT, hi)
        while at >= 0:
            candidate = at - _MAGIC_AT
            if not isinstance(frame_fields(view, candidate, segment.start + candidate, size - candidate), str):
                return candidate
            at = mm.find(_MAGIC_BYTES, at + 1, hi)
    return None


def _holds_data(segment: MappedFile, pos: int) -> bool:
    """Whether anything but zeros lies in ``segment`` from ``pos`` on."""
    mm = segment.mm
    for lo, hi in segment.data_ranges(pos, len(mm)):
        for at in range(lo, hi, len(_ZERO_CHUNK)):
            n = min(len(_ZERO_CHUNK), hi - at)
            if mm[at : at + n] != _ZERO_CHUNK[:n]:  # a copy and a memcmp: far faster than comparing a memoryview
                return True
    return False
