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
from collections.abc import Iterator, Mapping, Sequence
from typing import Protocol

from graymq.protocol.constants import KEY_SEPARATOR, PROPERTY_KEYS, PROPERTY_MSG_ID, PROPERTY_TAGS, PROPERTY_TRACE_ID
from graymq.protocol.crc import crc32
from graymq.protocol.errors import ProtocolError
from graymq.protocol.native import pick

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


class MessageExt:
    """A message as stored: body, properties and where the broker put it.

    A slotted class rather than a dataclass because a consumer builds one per message: the
    properties stay encoded until first read (``properties``; ``tags``, ``keys``, ``msg_id``
    and ``trace_id`` read single values without building the map), and the constructor takes
    ``raw_properties`` — the encoded section — for the decoder's use.
    """

    __slots__ = ("topic", "body", "queue_id", "queue_offset", "commit_log_offset", "sys_flag", "born_timestamp",
                 "store_timestamp", "reconsume_times", "born_host", "store_host", "store_size", "broker_name",
                 "_properties", "_raw_properties")

    def __init__(
        self, topic: str, body: bytes, queue_id: int, queue_offset: int, commit_log_offset: int,
        properties: dict[str, str] | None = None, sys_flag: int = 0, born_timestamp: int = 0,
        store_timestamp: int = 0, reconsume_times: int = 0, born_host: str = "", store_host: str = "",
        store_size: int = 0, broker_name: str = "", raw_properties: bytes = b"",
    ) -> None:
        self.topic = topic
        self.body = body
        self.queue_id = queue_id
        self.queue_offset = queue_offset
        self.commit_log_offset = commit_log_offset
        self.sys_flag = sys_flag
        self.born_timestamp = born_timestamp
        self.store_timestamp = store_timestamp
        self.reconsume_times = reconsume_times
        self.born_host = born_host
        self.store_host = store_host
        self.store_size = store_size
        self.broker_name = broker_name
        self._properties = properties if properties is not None or raw_properties else {}
        self._raw_properties = raw_properties

    @property
    def properties(self) -> dict[str, str]:
        properties = self._properties
        if properties is None:
            properties = self._properties = decode_properties(self._raw_properties)
            self._raw_properties = b""
        return properties

    @properties.setter
    def properties(self, value: dict[str, str]) -> None:
        self._properties, self._raw_properties = value, b""

    def _property(self, name: str) -> str:
        if self._properties is None:
            return find_property(self._raw_properties, name)
        return self._properties.get(name, "")

    @property
    def gray(self) -> bool:
        return bool(self.sys_flag & SYS_FLAG_GRAY)

    @property
    def tags(self) -> str:
        return self._property(PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        raw = self._property(PROPERTY_KEYS)
        return raw.split(KEY_SEPARATOR) if raw else []

    @property
    def msg_id(self) -> str:
        return self._property(PROPERTY_MSG_ID)

    @property
    def trace_id(self) -> str:
        return self._property(PROPERTY_TRACE_ID)

    def _fields(self) -> tuple[object, ...]:
        return (self.topic, self.body, self.queue_id, self.queue_offset, self.commit_log_offset, self.properties,
                self.sys_flag, self.born_timestamp, self.store_timestamp, self.reconsume_times, self.born_host,
                self.store_host, self.store_size, self.broker_name)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageExt):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it replaces

    def __repr__(self) -> str:
        return (f"MessageExt(topic={self.topic!r}, queue_id={self.queue_id}, queue_offset={self.queue_offset}, "
                f"commit_log_offset={self.commit_log_offset}, sys_flag={self.sys_flag}, "
                f"reconsume_times={self.reconsume_times}, body={len(self.body)} bytes, properties={self.properties!r})")


def encode_properties_py(properties: Mapping[str, str]) -> bytes:
    """``name \\x01 value \\x02`` pairs in UTF-8 (ValueError on a separator inside); the reference of
    ``encode_properties``."""
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
    """The property map of an encoded properties section; ``ProtocolError`` when it is not UTF-8."""
    if not raw:
        return {}
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError("record properties are not UTF-8") from exc
    result: dict[str, str] = {}
    for pair in text.split(PROPERTY_SEP):
        if pair:
            name, _, value = pair.partition(NAME_VALUE_SEP)
            result[name] = value
    return result


def find_property(raw: bytes, name: str) -> str:
    """One value of an encoded properties section ("" when absent) without decoding the others.

    Names and values never contain a separator, so ``name`` + NAME_VALUE_SEP at the start or right
    after a PROPERTY_SEP is the start of that pair.
    """
    keys = _property_keys.get(name)
    if keys is None:
        key = f"{name}{NAME_VALUE_SEP}".encode()
        keys = _property_keys[name] = (key, PROPERTY_SEP.encode() + key)
    key, inner_key = keys
    if raw.startswith(key):
        start = len(key)
    else:
        start = raw.find(inner_key)
        if start < 0:
            return ""
        start += len(inner_key)
    end = raw.find(_SEP, start)
    try:
        return raw[start : end if end >= 0 else len(raw)].decode()
    except UnicodeDecodeError as exc:
        raise ProtocolError("record properties are not UTF-8") from exc


_SEP = PROPERTY_SEP.encode()
_property_keys: dict[str, tuple[bytes, bytes]] = {}  # name -> (name + NAME_VALUE_SEP, PROPERTY_SEP + that), encoded


def encode_record_py(
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
    """Serialize one record (text fields already UTF-8 encoded, properties via ``encode_properties``); the
    reference of the compiled ``encode_record``."""
    total = RECORD_HEADER.size + len(topic) + len(born_host) + len(store_host) + len(body) + len(properties)
    after_crc = _RECORD_AFTER_CRC.pack(
        queue_id, sys_flag, queue_offset, physical_offset, born_timestamp, store_timestamp, reconsume_times,
        len(topic), len(born_host), len(store_host), len(body), len(properties),
    )
    tail = b"".join((after_crc, topic, born_host, store_host, body, properties))
    return b"".join((_RECORD_PREFIX.pack(total, RECORD_MAGIC, crc32(tail)), tail))


class PutFields(Protocol):
    """What ``encode_puts`` reads of a message to store (the store's ``PutMessage``)."""

    topic: str
    queue_id: int
    body: bytes
    properties: dict[str, str]
    sys_flag: int
    born_timestamp: int
    born_host: str
    reconsume_times: int


def encode_puts_py(puts: Sequence[PutFields], queue_offsets: Sequence[int], physical_offset: int,
                   store_timestamp: int, store_host: bytes) -> tuple[bytes, list[int]]:
    """The records of ``puts`` at ``queue_offsets``, laid end to end from ``physical_offset``, as one bytes, and
    each record's size; the reference of the compiled ``encode_puts`` (one call a batch, the records written
    straight into one buffer)."""
    records = []
    for put, queue_offset in zip(puts, queue_offsets, strict=True):
        record = encode_record_py(
            topic=put.topic.encode(), body=put.body, properties=encode_properties_py(put.properties),
            queue_id=put.queue_id, queue_offset=queue_offset, physical_offset=physical_offset,
            sys_flag=put.sys_flag, born_timestamp=put.born_timestamp, store_timestamp=store_timestamp,
            reconsume_times=put.reconsume_times, born_host=put.born_host.encode(), store_host=store_host,
        )
        records.append(record)
        physical_offset += len(record)
    return b"".join(records), [len(record) for record in records]


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
    crc = crc32(memoryview(buf)[pos + CRC_START : pos + total])
    if crc != fields[2]:
        raise ProtocolError(f"record at {pos}: CRC mismatch (stored 0x{fields[2]:08x}, computed 0x{crc:08x})")
    return total


def decode_record(buf: bytes | bytearray | memoryview, pos: int = 0, verify_crc: bool = True) -> MessageExt:
    """Decode the record at ``pos``; raises ``ProtocolError`` when it is damaged."""
    if type(buf) is not bytes:  # copy the record only, never a whole segment
        size = record_size_at(buf, pos)
        return decode_records(bytes(memoryview(buf)[pos : pos + size]), 0, 1, verify_crc, pos, "", MessageExt)[0]
    return decode_records(buf, pos, pos + 1, verify_crc, 0, "", MessageExt)[0]


def iter_records(
    buf: bytes | bytearray | memoryview, verify_crc: bool = True, broker_name: str = ""
) -> Iterator[MessageExt]:
    """Decode concatenated records (a pull response's ``records`` field from ``broker_name``), each CRC-checked
    by default."""
    data = buf if type(buf) is bytes else bytes(buf)
    return iter(decode_records(data, 0, len(data), verify_crc, 0, broker_name, MessageExt))


def decode_records_py(
    buf: bytes, pos: int, stop: int, verify_crc: bool, origin: int, broker_name: str, message_class: type[MessageExt]
) -> list[MessageExt]:
    """The records of ``buf`` starting in ``[pos, stop)`` as ``message_class`` objects, checked as ``check_record``
    does; ``origin`` is added to positions in errors. The reference of the compiled ``decode_records``.

    Per record: one header unpack, a CRC over a view, one copy each of the body and the properties;
    topic and hosts are decoded once per run of records that share them (a pull returns one queue's).
    """
    view = memoryview(buf)
    end = len(buf)
    strings_raw = b""
    split = (0, 0)
    topic = born_host = store_host = ""
    messages = []
    while pos < stop:
        left = end - pos
        if left < _HEADER_SIZE:
            raise ProtocolError(f"record at {origin + pos}: {left} bytes left, header needs {_HEADER_SIZE}")
        (
            total, magic, crc, queue_id, sys_flag, queue_offset, physical_offset, born_ts, store_ts,
            reconsume_times, topic_len, born_len, store_len, body_len, props_len,
        ) = _unpack_header(buf, pos)
        if magic != RECORD_MAGIC:
            raise ProtocolError(f"record at {origin + pos}: bad magic 0x{magic:08x}")
        if not _HEADER_SIZE <= total <= MAX_RECORD_SIZE:
            raise ProtocolError(f"record at {origin + pos}: size {total} out of range")
        if left < total:
            raise ProtocolError(f"record at {origin + pos}: truncated, {left} of {total} bytes")
        strings_len = topic_len + born_len + store_len
        if verify_crc:
            if _HEADER_SIZE + strings_len + body_len + props_len != total:
                raise ProtocolError(f"record at {origin + pos}: field lengths do not add up to {total}")
            computed = crc32(view[pos + CRC_START : pos + total])
            if computed != crc:
                raise ProtocolError(
                    f"record at {origin + pos}: CRC mismatch (stored 0x{crc:08x}, computed 0x{computed:08x})")
        p = pos + _HEADER_SIZE
        if len(strings_raw) != strings_len or not buf.startswith(strings_raw, p) or split != (topic_len, born_len):
            strings_raw = buf[p : p + strings_len]
            split = (topic_len, born_len)
            topic = strings_raw[:topic_len].decode()
            born_host = strings_raw[topic_len : topic_len + born_len].decode()
            store_host = strings_raw[topic_len + born_len :].decode()
        p += strings_len
        body_end = p + body_len
        messages.append(message_class(
            topic, buf[p:body_end], queue_id, queue_offset, physical_offset, None, sys_flag, born_ts, store_ts,
            reconsume_times, born_host, store_host, total, broker_name, buf[body_end : body_end + props_len],
        ))
        pos += total
    return messages


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


encode_properties = pick("encode_properties", encode_properties_py)
encode_record = pick("encode_record", encode_record_py)
encode_puts = pick("encode_puts", encode_puts_py)
decode_records = pick("decode_records", decode_records_py)
