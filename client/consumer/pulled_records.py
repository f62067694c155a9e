"""Decoding a pull response's records so that a damaged record costs only itself.

The whole response is decoded in one pass (the fast path). Only when that fails is it decoded
again record by record: a damaged record is skipped and reported as a ``DamagedRecord``, and
decoding resumes at the next record — right after the damaged one when its declared size leads
to a sound record, else at the next position where a sound record starts. The messages around
it are delivered; the pull's ``next_begin_offset`` still moves the queue past it.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass

from graymq.client.message import MessageExt, MessageQueue
from graymq.protocol.errors import ProtocolError
from graymq.protocol.record import RECORD_HEADER, RECORD_MAGIC, check_record, decode_record, iter_records

log = logging.getLogger(__name__)

_DECODE_ERRORS = (ProtocolError, UnicodeDecodeError)  # a sound CRC over non-UTF-8 strings is damage too
_MAGIC = struct.pack(">I", RECORD_MAGIC)
_MAGIC_AT = 4  # the magic's position inside a record (after total_size)
_QUEUE_OFFSET_FIELD = 5  # index of queue_offset in RECORD_HEADER


@dataclass(frozen=True)
class DamagedRecord:
    """A part of a pull response that does not decode: one record, or a run of them whose boundaries are lost.

    ``first_offset``..``last_offset`` are the queue offsets it may hold: the record's own when its
    header is readable and fits between its sound neighbours, else every offset between them.
    """

    first_offset: int
    last_offset: int
    reason: str

    def offsets(self) -> str:
        if self.first_offset == self.last_offset:
            return f"queue offset {self.first_offset}"
        return f"queue offsets {self.first_offset}..{self.last_offset}"


def decode_pulled(records: bytes, broker_name: str, tags: frozenset[str] | None, pulled_from: int,
                  next_offset: int) -> tuple[list[MessageExt], list[DamagedRecord]]:
    """The messages of a pull response matching ``tags`` (None: every tag), and the damaged records skipped.

    ``pulled_from`` is the pull's queue offset and ``next_offset`` the response's next begin
    offset: they bound the offsets a damaged record is reported at. A record whose properties do
    not decode while filtering by tag counts as damaged as well.
    """
    try:
        messages = list(iter_records(records, broker_name=broker_name))
        damaged: list[DamagedRecord] = []
    except _DECODE_ERRORS:
        messages, damaged = _decode_each(records, broker_name, pulled_from, next_offset)
    if tags is None:
        return messages, damaged
    try:
        return [m for m in messages if m.tags in tags], damaged
    except _DECODE_ERRORS:
        return _filter_each(messages, tags, damaged)


def log_damaged(mq: MessageQueue, address: str, damaged: list[DamagedRecord]) -> None:
    """One ERROR line per damaged record skipped, naming topic, queue, broker and queue offset."""
    for record in damaged:
        log.error("skipped a damaged record of topic %s queue %d on broker %s (%s) at %s: %s; the messages after "
                  "it are delivered", mq.topic, mq.queue_id, mq.broker_name, address, record.offsets(), record.reason)


def _filter_each(messages: list[MessageExt], tags: frozenset[str],
                 damaged: list[DamagedRecord]) -> tuple[list[MessageExt], list[DamagedRecord]]:
    kept = []
    for m in messages:
        try:
            if m.tags in tags:
                kept.append(m)
        except _DECODE_ERRORS as exc:
            damaged.append(DamagedRecord(m.queue_offset, m.queue_offset, str(exc)))
    damaged.sort(key=lambda d: d.first_offset)
    return kept, damaged


def _decode_each(buf: bytes, broker_name: str, pulled_from: int,
                 next_offset: int) -> tuple[list[MessageExt], list[DamagedRecord]]:
    # In order: decoded messages, and (header queue offset or None, whether one record, reason) per damaged part.
    parts: list[MessageExt | tuple[int | None, bool, str]] = []
    pos, end = 0, len(buf)
    while pos < end:
        try:
            message = decode_record(buf, pos)
        except _DECODE_ERRORS as exc:
            resume, whole = _resume_at(buf, pos)
            parts.append((_header_offset(buf, pos), whole, str(exc)))
            pos = resume
            continue
        message.broker_name = broker_name
        parts.append(message)
        pos += message.store_size
    messages = [p for p in parts if isinstance(p, MessageExt)]
    damaged = []
    for i, part in enumerate(parts):
        if isinstance(part, MessageExt):
            continue
        before = next((p.queue_offset for p in reversed(parts[:i]) if isinstance(p, MessageExt)), pulled_from - 1)
        after = next((p.queue_offset for p in parts[i + 1:] if isinstance(p, MessageExt)), next_offset)
        low, high = before + 1, max(before + 1, after - 1)
        own, whole, reason = part
        if whole and own is not None and low <= own <= high:
            low = high = own
        damaged.append(DamagedRecord(low, high, reason))
    return messages, damaged


def _resume_at(buf: bytes, pos: int) -> tuple[int, bool]:
    """Where the next sound record after the damaged one at ``pos`` starts (``len(buf)`` when none does), and
    whether the damage is exactly one record (its declared size leads there)."""
    end = len(buf)
    declared = _declared_size(buf, pos)
    if declared is not None and (pos + declared == end or _sound(buf, pos + declared)):
        return pos + declared, True
    found = buf.find(_MAGIC, pos + _MAGIC_AT + 1)
    while found >= 0:
        if _sound(buf, found - _MAGIC_AT):
            return found - _MAGIC_AT, False
        found = buf.find(_MAGIC, found + 1)
    return end, False


def _declared_size(buf: bytes, pos: int) -> int | None:
    """The total size the record at ``pos`` declares, when its magic is right and it fits in ``buf``."""
    if len(buf) - pos < RECORD_HEADER.size:
        return None
    total, magic = struct.unpack_from(">II", buf, pos)
    if magic != RECORD_MAGIC or not RECORD_HEADER.size <= total <= len(buf) - pos:
        return None
    return int(total)


def _header_offset(buf: bytes, pos: int) -> int | None:
    """The queue offset in the header at ``pos`` when there is a whole header with the right magic."""
    if len(buf) - pos < RECORD_HEADER.size or buf[pos + _MAGIC_AT : pos + _MAGIC_AT + 4] != _MAGIC:
        return None
    return int(RECORD_HEADER.unpack_from(buf, pos)[_QUEUE_OFFSET_FIELD])


def _sound(buf: bytes, pos: int) -> bool:
    try:
        check_record(buf, pos)
    except ProtocolError:
        return False
    return True
