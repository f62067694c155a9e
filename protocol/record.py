"""The stored message record: the commit log's unit, also what a pull returns byte for byte.

Layout (big-endian), declared once here:

    RECORD_HEADER
      total_size       uint32   whole record, header included
      magic            uint32   RECORD_MAGIC
      crc32            uint32   CRC32 of bytes [CRC_START, total_size) — everything after this field
      queue_id         int32
      sys_flag         int32    bit 0: gray
      queue_offset     int64    position in the consume queue of (topic, queue_id)
      physical_offset  int64    position of this record in the commit log
      born_timestamp   int64    ms, set by the producer
      store_timestamp  int64    ms, set by the broker
      reconsume_times  int32
      topic_len        uint16
      born_host_len    uint16
      store_host_len   uint16
      body_len         uint32
      properties_len   uint32
    then topic, born_host, store_host (UTF-8), body, properties.

Properties are ``name \\x01 value \\x02`` pairs in UTF-8; names and values must not contain
either separator.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from protocol.constants import KEY_SEPARATOR, PROPERTY_KEYS, PROPERTY_MSG_ID, PROPERTY_TAGS, PROPERTY_TRACE_ID
from protocol.errors import ProtocolError

RECORD_MAGIC = 0x47524159  # "GRAY"
RECORD_HEADER = struct.Struct(">IIIiiqqqqiHHHII")
CRC_START = 12
# RECORD_HEADER split at CRC_START, for writers that checksum the fields after the CRC before packing it:
# (total_size, magic, crc32) and (queue_id ... properties_len).
_RECORD_PREFIX = struct.Struct(">" + RECORD_HEADER.format[1:4])
_RECORD_AFTER_CRC = struct.Struct(">" + RECORD_HEADER.format[4:])
assert _RECORD_PREFIX.size == CRC_START and CRC_START + _RECORD_AFTER_CRC.size == RECORD_HEADER.size
_HEADER_SIZE = RECORD_HEADER.size
_unpack_header = RECORD_HEADER.unpack_from
SYS_FLAG_GRAY = 0x1
NAME_VALUE_SEP = "\x01"
PROPERTY_SEP = "\x02"
MAX_RECORD_SIZE = 64 * 1024 * 1024


@dataclass(slots=True)
class MessageExt:
    """A message as stored: body, properties and where the broker put it."""

    topic: str
    body: bytes
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    properties: dict[str, str] = field(default_factory=dict)
    sys_flag: int = 0
    born_timestamp: int = 0
    store_timestamp: int = 0
    reconsume_times: int = 0
    born_host: str = ""
    store_host: str = ""
    store_size: int = 0
    broker_name: str = ""

    @property
    def gray(self) -> bool:
        return bool(self.sys_flag & SYS_FLAG_GRAY)

    @property
    def tags(self) -> str:
        return self.properties.get(PROPERTY_TAGS, "")

    @property
    def keys(self) -> list[str]:
        raw = self.properties.get(PROPERTY_KEYS, "")
        return raw.split(KEY_SEPARATOR) if raw else []

    @property
    def msg_id(self) -> str:
        return self.properties.get(PROPERTY_MSG_ID, "")

    @property
    def trace_id(self) -> str:
        return self.properties.get(PROPERTY_TRACE_ID, "")


def encode_properties(properties: Mapping[str, str]) -> bytes:
    if not properties:
        return b""
    text = "".join([f"{name}{NAME_VALUE_SEP}{value}{PROPERTY_SEP}" for name, value in properties.items()])
    # Each pair adds exactly one of each separator; any more means a name or value contains one.
    if text.count(NAME_VALUE_SEP) != len(properties) or text.count(PROPERTY_SEP) != len(properties):
        bad = next(n for n, v in properties.items()
                   if NAME_VALUE_SEP in n or PROPERTY_SEP in n or NAME_VALUE_SEP in v or PROPERTY_SEP in v)
        raise ValueError(f"property {bad!r} contains a reserved separator character")
    return text.encode("utf-8")


def decode_properties(raw: bytes) -> dict[str, str]:
    return _parse_properties(raw.decode("utf-8")) if raw else {}


def _parse_properties(text: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for pair in text.split(PROPERTY_SEP):
        if pair:
            name, _, value = pair.partition(NAME_VALUE_SEP)
            result[name] = value
    return result


def encode_record(
    *,
    topic: bytes,
    body: bytes,
    properties: bytes,
    queue_id: int,
    queue_offset: int,
    physical_offset: int,
    sys_flag: int = 0,
    born_timestamp: int = 0,
    store_timestamp: int = 0,
    reconsume_times: int = 0,
    born_host: bytes = b"",
    store_host: bytes = b"",
) -> bytes:
    """Serialize one record (text fields already UTF-8 encoded, properties via ``encode_properties``)."""
    total = RECORD_HEADER.size + len(topic) + len(born_host) + len(store_host) + len(body) + len(properties)
    after_crc = _RECORD_AFTER_CRC.pack(
        queue_id, sys_flag, queue_offset, physical_offset, born_timestamp, store_timestamp, reconsume_times,
        len(topic), len(born_host), len(store_host), len(body), len(properties),
    )
    tail = b"".join((after_crc, topic, born_host, store_host, body, properties))
    return b"".join((_RECORD_PREFIX.pack(total, RECORD_MAGIC, zlib.crc32(tail)), tail))


def record_size_at(buf: bytes | bytearray | memoryview, pos: int) -> int:
    """The declared total size of the record at ``pos`` after checking its magic and bounds."""
    if len(buf) - pos < RECORD_HEADER.size:
        raise ProtocolError(f"record at {pos}: {len(buf) - pos} bytes left, header needs {RECORD_HEADER.size}")
    total, magic = struct.unpack_from(">II", buf, pos)
    if magic != RECORD_MAGIC:
        raise ProtocolError(f"record at {pos}: bad magic 0x{magic:08x}")
    if not RECORD_HEADER.size <= total <= MAX_RECORD_SIZE:
        raise ProtocolError(f"record at {pos}: size {total} out of range")
    if len(buf) - pos < total:
        raise ProtocolError(f"record at {pos}: truncated, {len(buf) - pos} of {total} bytes")
    return int(total)


def check_record(buf: bytes | bytearray | memoryview, pos: int = 0) -> int:
    """Validate magic, size, field lengths and CRC of the record at ``pos``; return its size."""
    total = record_size_at(buf, pos)
    fields = RECORD_HEADER.unpack_from(buf, pos)
    if RECORD_HEADER.size + sum(fields[10:15]) != total:
        raise ProtocolError(f"record at {pos}: field lengths do not add up to {total}")
    crc = zlib.crc32(memoryview(buf)[pos + CRC_START : pos + total])
    if crc != fields[2]:
        raise ProtocolError(f"record at {pos}: CRC mismatch (stored 0x{fields[2]:08x}, computed 0x{crc:08x})")
    return total


def decode_record(buf: bytes | bytearray | memoryview, pos: int = 0, verify_crc: bool = True) -> MessageExt:
    """Decode the record at ``pos``; raises ``ProtocolError`` when it is damaged."""
    return _decode_at(memoryview(buf), pos, verify_crc)


def _decode_at(view: memoryview, pos: int, verify_crc: bool) -> MessageExt:
    """``record_size_at`` + ``check_record`` + decoding with one header unpack and no copy but the body."""
    left = len(view) - pos
    if left < _HEADER_SIZE:
        raise ProtocolError(f"record at {pos}: {left} bytes left, header needs {_HEADER_SIZE}")
    (
        total, magic, crc, queue_id, sys_flag, queue_offset, physical_offset, born_ts, store_ts,
        reconsume_times, topic_len, born_len, store_len, body_len, props_len,
    ) = _unpack_header(view, pos)
    if magic != RECORD_MAGIC:
        raise ProtocolError(f"record at {pos}: bad magic 0x{magic:08x}")
    if not _HEADER_SIZE <= total <= MAX_RECORD_SIZE:
        raise ProtocolError(f"record at {pos}: size {total} out of range")
    if left < total:
        raise ProtocolError(f"record at {pos}: truncated, {left} of {total} bytes")
    if verify_crc:
        if _HEADER_SIZE + topic_len + born_len + store_len + body_len + props_len != total:
            raise ProtocolError(f"record at {pos}: field lengths do not add up to {total}")
        computed = zlib.crc32(view[pos + CRC_START : pos + total])
        if computed != crc:
            raise ProtocolError(f"record at {pos}: CRC mismatch (stored 0x{crc:08x}, computed 0x{computed:08x})")
    p = pos + _HEADER_SIZE
    topic = str(view[p : p + topic_len], "utf-8")
    p += topic_len
    born_host = str(view[p : p + born_len], "utf-8")
    p += born_len
    store_host = str(view[p : p + store_len], "utf-8")
    p += store_len
    body = view[p : p + body_len].tobytes()
    p += body_len
    try:
        properties = _parse_properties(str(view[p : p + props_len], "utf-8")) if props_len else {}
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"record at {pos}: properties are not UTF-8") from exc
    return MessageExt(
        topic=topic, body=body, queue_id=queue_id, queue_offset=queue_offset, commit_log_offset=physical_offset,
        properties=properties, sys_flag=sys_flag, born_timestamp=born_ts, store_timestamp=store_ts,
        reconsume_times=reconsume_times, born_host=born_host, store_host=store_host, store_size=total,
    )


def iter_records(buf: bytes | bytearray | memoryview, verify_crc: bool = True) -> Iterator[MessageExt]:
    """Decode concatenated records (a pull response's ``records`` field), each CRC-checked by default."""
    view = memoryview(buf)
    pos = 0
    end = len(view)
    while pos < end:
        message = _decode_at(view, pos, verify_crc)
        yield message
        pos += message.store_size


def make_properties(
    *, tags: str = "", keys: list[str] | tuple[str, ...] = (), msg_id: str = "", trace_id: str = "",
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Assemble the stored property map from a message's parts."""
    properties = dict(extra or {})
    if tags:
        properties[PROPERTY_TAGS] = tags
    if keys:
        properties[PROPERTY_KEYS] = KEY_SEPARATOR.join(keys)
    if msg_id:
        properties[PROPERTY_MSG_ID] = msg_id
    if trace_id:
        properties[PROPERTY_TRACE_ID] = trace_id
    return properties
