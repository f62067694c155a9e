# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled hot path: the per-message and per-request byte work of the broker and the client.

Each function here has a pure-Python twin of the same name and behaviour (frame.py, record.py,
index_file.py, dispatch.py, send_processor.py), which stays the reference: tests/unit/test_native_*.py check that both give
byte-identical output and raise the same error types for the same input. ``graymq.protocol.native``
picks this module or the twins (``GRAYMQ_PURE=1`` forces the twins).

A record's CRC32 is protocol/crc.py's ``crc32`` (ISA-L's, else zlib's) called on a view of the bytes in place:
the same function as the pure path, so the stored checksum cannot drift between the two.

Cython was chosen over mypyc by a measured prototype (1 KiB bodies, CPython 3.11, shared 2-core
machine): see the module docstring of ``graymq.protocol.native`` for the figures.
"""

import struct
import zlib

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.memoryview cimport PyMemoryView_FromMemory
from cpython.number cimport PyNumber_Index
from cpython.buffer cimport PyBUF_READ
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

import time

from graymq.protocol.constants import (
    KEY_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_MSG_ID,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_PRODUCER_SEQUENCE,
    PROPERTY_TAGS,
    PROPERTY_TRACE_ID,
)
from graymq.protocol.crc import crc32
from graymq.protocol.errors import BadRequestError, MessageTooLargeError, ProtocolError

cdef object _crc32 = zlib.crc32  # key-index hashes of short strings
cdef object _record_crc = crc32  # records: protocol/crc.py's choice, the pure path's too
cdef object _struct_error = struct.error
cdef object _time = time.time
cdef object _tuple_new = tuple.__new__

# frame.py's constants, repeated as C values (the tests compare both modules' outputs)
cdef uint32_t MSG_TOKEN = 0xFF7FF4FE
cdef Py_ssize_t BLOCK_SIZE = 1024 * 1024
# record.py's constants
cdef uint32_t RECORD_MAGIC = 0x47524159
cdef Py_ssize_t HEADER_SIZE = 70
cdef Py_ssize_t CRC_START = 12
cdef int64_t MAX_RECORD_SIZE = 64 * 1024 * 1024
cdef uint32_t HASH_TOP_BIT = 0x80000000
cdef int SYS_FLAG_GRAY = 1  # record.py's
cdef dict _topic_seeds = {}
# consume_queue.py's unit: commit-log offset int64, size int32, tag hash int64
cdef Py_ssize_t UNIT_SIZE = 20


cdef inline void _put32(char* p, uint64_t v) noexcept:
    p[0] = <char>((v >> 24) & 0xFF)
    p[1] = <char>((v >> 16) & 0xFF)
    p[2] = <char>((v >> 8) & 0xFF)
    p[3] = <char>(v & 0xFF)


cdef inline void _put16(char* p, uint64_t v) noexcept:
    p[0] = <char>((v >> 8) & 0xFF)
    p[1] = <char>(v & 0xFF)


cdef inline void _put64(char* p, uint64_t v) noexcept:
    _put32(p, v >> 32)
    _put32(p + 4, v & 0xFFFFFFFF)


cdef inline uint64_t _get32(const unsigned char* p) noexcept:
    return (<uint64_t>p[0] << 24) | (<uint64_t>p[1] << 16) | (<uint64_t>p[2] << 8) | <uint64_t>p[3]


cdef inline uint64_t _get64(const unsigned char* p) noexcept:
    return (_get32(p) << 32) | _get32(p + 4)


cdef inline int64_t _signed(object value, int bits, str name) except? -1:
    """``value`` as a signed ``bits``-bit integer, ``struct.error`` outside it or not an integer (as ``struct.pack``)."""
    cdef long long v
    try:
        v = value if type(value) is int else PyNumber_Index(value)
    except (OverflowError, TypeError):
        raise _struct_error(f"{name} {value!r} is not an int{bits}") from None
    if bits < 64 and not -(1LL << (bits - 1)) <= v < (1LL << (bits - 1)):
        raise _struct_error(f"{name} {value!r} is not an int{bits}")
    return v


cdef inline bytes _as_bytes(object data):
    return data if type(data) is bytes else bytes(data)


def encode_frame(serial_no, payload, Py_ssize_t max_frame_size=16 * 1024 * 1024):
    """frame.encode_frame: one frame carrying ``payload`` in blocks of at most 1 MiB."""
    cdef bytes data = _as_bytes(payload)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(data)
    cdef Py_ssize_t blocks, start, n, pos
    if size > max_frame_size:
        raise ProtocolError(f"payload of {size} bytes exceeds the frame limit of {max_frame_size}")
    if not 0 <= serial_no <= 0xFFFFFFFF:
        raise ProtocolError(f"serial number {serial_no} outside uint32")
    blocks = (size + BLOCK_SIZE - 1) // BLOCK_SIZE if size else 1
    cdef bytes out = PyBytes_FromStringAndSize(NULL, 12 + 4 * blocks + size)
    cdef char* p = PyBytes_AS_STRING(out)
    cdef const char* src = PyBytes_AS_STRING(data)
    _put32(p, MSG_TOKEN)
    _put32(p + 4, <uint64_t>serial_no)
    _put32(p + 8, blocks)
    pos = 12
    start = 0
    while True:
        n = min(BLOCK_SIZE, size - start)
        _put32(p + pos, n)
        memcpy(p + pos + 4, src + start, n)
        pos += 4 + n
        start += n
        if start >= size:
            return out


def parse_frame(bytearray buf, Py_ssize_t start, Py_ssize_t max_frame_size, Py_ssize_t max_blocks):
    """frame.parse_frame: ``(serial_no, payload, end)`` of the whole frame at ``start``, or ``None`` when more
    bytes are needed; ``ProtocolError`` on a bad token, block count, length or size."""
    cdef Py_ssize_t end = PyByteArray_GET_SIZE(buf)
    cdef const unsigned char* p = <const unsigned char*>PyByteArray_AS_STRING(buf)
    cdef unsigned char token[4]
    cdef Py_ssize_t have = end - start, pos, total = 0, i, first = -1, first_len = 0
    cdef uint64_t list_size, length
    _put32(<char*>token, MSG_TOKEN)
    if have < 12:
        if have > 0 and memcmp(p + start, token, min(have, 4)) != 0:
            raise ProtocolError(f"bad frame token {bytes(buf[start:start + min(have, 4)]).hex()}")
        return None
    if memcmp(p + start, token, 4) != 0:
        raise ProtocolError(f"bad frame token 0x{_get32(p + start):08x}")
    list_size = _get32(p + start + 8)
    if not 1 <= list_size <= <uint64_t>max_blocks:
        raise ProtocolError(f"frame block count {list_size} outside 1..{max_blocks}")
    pos = start + 12
    for i in range(<Py_ssize_t>list_size):
        if end - pos < 4:
            return None
        length = _get32(p + pos)
        if length >= 0x80000000:
            raise ProtocolError(f"negative block length {<int64_t>length - 0x100000000}")
        total += length
        if total > max_frame_size:
            raise ProtocolError(f"frame of at least {total} bytes exceeds the limit of {max_frame_size}")
        pos += 4
        if end - pos < <Py_ssize_t>length:
            return None
        if first < 0:
            first, first_len = pos, length
        pos += length
    cdef bytes payload
    if list_size == 1:
        payload = PyBytes_FromStringAndSize(<const char*>p + first, first_len)
    else:
        payload = _join_blocks(p, start + 12, <Py_ssize_t>list_size, total)
    return _get32(p + start + 4), payload, pos


cdef bytes _join_blocks(const unsigned char* p, Py_ssize_t pos, Py_ssize_t blocks, Py_ssize_t total):
    cdef bytes out = PyBytes_FromStringAndSize(NULL, total)
    cdef char* dst = PyBytes_AS_STRING(out)
    cdef Py_ssize_t i, length, at = 0
    for i in range(blocks):
        length = _get32(p + pos)
        memcpy(dst + at, p + pos + 4, length)
        at += length
        pos += 4 + length
    return out


def encode_record(*, topic, body, properties, queue_id, queue_offset, physical_offset, sys_flag=0,
                  born_timestamp=0, store_timestamp=0, reconsume_times=0, born_host=b"", store_host=b""):
    """record.encode_record: one record, CRC32 over everything after the CRC field."""
    cdef bytes t = _as_bytes(topic), b = _as_bytes(body), pr = _as_bytes(properties)
    cdef bytes bh = _as_bytes(born_host), sh = _as_bytes(store_host)
    cdef _Header h
    _check(&h, t, b, pr, bh, sh, queue_id, queue_offset, physical_offset, sys_flag, born_timestamp,
           store_timestamp, reconsume_times)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, h.total)
    _write(PyBytes_AS_STRING(out), &h, t, b, pr, bh, sh)
    return out


def encode_puts(puts, queue_offsets, physical_offset, store_timestamp, store_host):
    """record.encode_puts: the records of ``puts`` (each checked before the next is read, as the reference
    does) laid end to end from ``physical_offset`` into one bytes, and each record's size."""
    cdef Py_ssize_t n = len(puts), i = 0, total = 0
    cdef bytes sh = _as_bytes(store_host)
    cdef list texts = []  # per record: topic, body, properties, born host
    cdef list sizes = []
    cdef bytes t, b, pr, bh, out
    cdef char* p
    cdef _Header* headers = <_Header*>PyMem_Malloc(max(n, 1) * sizeof(_Header))
    if headers == NULL:
        raise MemoryError()
    try:
        for put, queue_offset in zip(puts, queue_offsets, strict=True):
            t, b, pr, bh = put.topic.encode(), _as_bytes(put.body), _properties(put.properties), put.born_host.encode()
            _check(&headers[i], t, b, pr, bh, sh, put.queue_id, queue_offset, physical_offset + total,
                   put.sys_flag, put.born_timestamp, store_timestamp, put.reconsume_times)
            texts.append((t, b, pr, bh))
            sizes.append(headers[i].total)
            total += headers[i].total
            i += 1
        out = PyBytes_FromStringAndSize(NULL, total)
        p = PyBytes_AS_STRING(out)
        for i in range(n):
            t, b, pr, bh = texts[i]
            _write(p, &headers[i], t, b, pr, bh, sh)
            p += headers[i].total
    finally:
        PyMem_Free(headers)
    return out, sizes


cdef struct _Header:
    Py_ssize_t total
    int64_t qid, flag, qoff, poff, born, stored, times


cdef int _check(_Header* h, bytes t, bytes b, bytes pr, bytes bh, bytes sh, queue_id, queue_offset, physical_offset,
                sys_flag, born_timestamp, store_timestamp, reconsume_times) except -1:
    """A record's header fields into ``h``, ``struct.error`` on a field out of range (as ``struct.pack``)."""
    cdef Py_ssize_t tl = len(t), bl = len(b), pl = len(pr), bhl = len(bh), shl = len(sh)
    if tl > 0xFFFF or bhl > 0xFFFF or shl > 0xFFFF:
        raise _struct_error("a topic or host longer than 65535 bytes (uint16 length)")
    if bl > 0xFFFFFFFF or pl > 0xFFFFFFFF:
        raise _struct_error("a body or properties section longer than uint32")
    h.total = HEADER_SIZE + tl + bhl + shl + bl + pl
    if h.total > 0xFFFFFFFF:
        raise _struct_error(f"record of {h.total} bytes is larger than uint32")
    h.qid = _signed(queue_id, 32, "queue_id")
    h.flag = _signed(sys_flag, 32, "sys_flag")
    h.qoff = _signed(queue_offset, 64, "queue_offset")
    h.poff = _signed(physical_offset, 64, "physical_offset")
    h.born = _signed(born_timestamp, 64, "born_timestamp")
    h.stored = _signed(store_timestamp, 64, "store_timestamp")
    h.times = _signed(reconsume_times, 32, "reconsume_times")
    return 0


cdef void _write(char* p, _Header* h, bytes t, bytes b, bytes pr, bytes bh, bytes sh) except *:
    """The record of ``h`` and its texts at ``p`` (``h.total`` bytes), its CRC last."""
    cdef Py_ssize_t total = h.total, tl = len(t), bl = len(b), pl = len(pr), bhl = len(bh), shl = len(sh)
    _put32(p, total)
    _put32(p + 4, RECORD_MAGIC)
    _put32(p + 12, <uint64_t>h.qid)
    _put32(p + 16, <uint64_t>h.flag)
    _put64(p + 20, <uint64_t>h.qoff)
    _put64(p + 28, <uint64_t>h.poff)
    _put64(p + 36, <uint64_t>h.born)
    _put64(p + 44, <uint64_t>h.stored)
    _put32(p + 52, <uint64_t>h.times)
    _put16(p + 56, tl)
    _put16(p + 58, bhl)
    _put16(p + 60, shl)
    _put32(p + 62, bl)
    _put32(p + 66, pl)
    cdef Py_ssize_t pos = HEADER_SIZE
    memcpy(p + pos, PyBytes_AS_STRING(t), tl)
    pos += tl
    memcpy(p + pos, PyBytes_AS_STRING(bh), bhl)
    pos += bhl
    memcpy(p + pos, PyBytes_AS_STRING(sh), shl)
    pos += shl
    memcpy(p + pos, PyBytes_AS_STRING(b), bl)
    pos += bl
    memcpy(p + pos, PyBytes_AS_STRING(pr), pl)
    crc = _record_crc(PyMemoryView_FromMemory(p + CRC_START, total - CRC_START, PyBUF_READ))
    _put32(p + 8, <uint64_t>crc)


def encode_properties(properties):
    """record.encode_properties: ``name \\x01 value \\x02`` pairs in UTF-8; ValueError on a separator inside."""
    return _properties(properties)


cdef bytes _properties(properties):
    if not properties:
        return b""
    cdef list parts = []
    for name, value in properties.items():
        if "\x01" in name or "\x02" in name or "\x01" in value or "\x02" in value:
            raise ValueError(f"property {name!r} contains a reserved separator character")
        parts.append(name)
        parts.append("\x01")
        parts.append(value)
        parts.append("\x02")
    return "".join(parts).encode("utf-8")


def index_entries(str topic, properties, physical_offset, store_timestamp):
    """index_file.index_entries: one key-index entry per distinct key, and one for the msg id."""
    return _index_entries(topic, properties, _signed(physical_offset, 64, "physical_offset"),
                          _signed(store_timestamp, 64, "store_timestamp"))


cdef bytes _index_entries(str topic, properties, int64_t offset, int64_t stamp):
    keys = properties.get(PROPERTY_KEYS)
    msg_id = properties.get(PROPERTY_MSG_ID)
    seed = _topic_seeds.get(topic)
    if seed is None:
        if len(_topic_seeds) >= 4096:
            _topic_seeds.clear()
        seed = _topic_seeds[topic] = _crc32(f"{topic}\x01".encode())
    if not keys:
        return _entry(_crc32(msg_id.encode(), seed), offset, stamp) if msg_id else b""
    names = keys.split(KEY_SEPARATOR)
    if msg_id:
        names.append(msg_id)
    return b"".join([_entry(_crc32(name.encode(), seed), offset, stamp) for name in dict.fromkeys(names) if name])


def place_puts(puts, queue_offsets, sizes, physical_offset, store_timestamp, result_class):
    """dispatch.place_puts: per queue the consume-queue units of ``puts`` (stored end to end from
    ``physical_offset`` with ``sizes``), their key-index entries, and a ``result_class`` per put (a named tuple
    class: made with ``tuple.__new__``, not its Python ``__new__``)."""
    cdef int64_t offset = _signed(physical_offset, 64, "physical_offset")
    cdef int64_t stamp = _signed(store_timestamp, 64, "store_timestamp")
    cdef int64_t size
    cdef Py_ssize_t at
    cdef char* p
    cdef dict units = {}, tag_hashes = {}
    cdef list entries = [], results = []
    cdef bytearray block
    for put, queue_offset, record_size in zip(puts, queue_offsets, sizes, strict=True):
        properties = put.properties
        tags = properties.get(PROPERTY_TAGS, "")
        hashed = tag_hashes.get(tags)
        if hashed is None:
            hashed = tag_hashes[tags] = _tag_hash(tags)
        topic = put.topic
        key = (topic, put.queue_id)
        block = units.get(key)
        if block is None:
            block = units[key] = bytearray()
        size = _signed(record_size, 32, "size")
        at = PyByteArray_GET_SIZE(block)
        PyByteArray_Resize(block, at + UNIT_SIZE)
        p = PyByteArray_AS_STRING(block) + at
        _put64(p, <uint64_t>offset)
        _put32(p + 8, <uint64_t>size)
        _put64(p + 12, <uint64_t>_signed(hashed, 64, "tag hash"))
        entry = _index_entries(topic, properties, offset, stamp)
        if entry:
            entries.append(entry)
        results.append(_tuple_new(result_class, (offset, size, queue_offset, store_timestamp, offset + size)))
        offset += size
    return units, b"".join(entries), results


cdef object _tag_hash(str tags):
    """constants.tag_hash: 0 for no tag, else the CRC32 of its UTF-8 (1 where that is 0)."""
    if not tags:
        return 0
    return _crc32(tags.encode("utf-8")) or 1


cdef bytes _entry(uint64_t hashed, int64_t offset, int64_t stamp):
    cdef bytes out = PyBytes_FromStringAndSize(NULL, 20)
    cdef char* p = PyBytes_AS_STRING(out)
    _put32(p, hashed | HASH_TOP_BIT)
    _put64(p + 4, <uint64_t>offset)
    _put64(p + 12, <uint64_t>stamp)
    return out


def decode_records(bytes buf, Py_ssize_t pos, Py_ssize_t stop, bint verify_crc, Py_ssize_t origin, str broker_name,
                   message_class):
    """record._decode as a list: the records starting in ``[pos, stop)``, checked as ``check_record`` does."""
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(buf)
    cdef Py_ssize_t end = PyBytes_GET_SIZE(buf), left, total, strings_len, body_len, props_len, at
    cdef uint64_t magic, crc
    cdef int topic_len, born_len, store_len
    cdef list out = []
    cdef bytes strings_raw = b""
    cdef int split_topic = -1, split_born = -1
    topic = born_host = store_host = ""
    while pos < stop:
        left = end - pos
        if left < HEADER_SIZE:
            raise ProtocolError(f"record at {origin + pos}: {left} bytes left, header needs {HEADER_SIZE}")
        total = _get32(p + pos)
        magic = _get32(p + pos + 4)
        if magic != RECORD_MAGIC:
            raise ProtocolError(f"record at {origin + pos}: bad magic 0x{magic:08x}")
        if not HEADER_SIZE <= total <= MAX_RECORD_SIZE:
            raise ProtocolError(f"record at {origin + pos}: size {total} out of range")
        if left < total:
            raise ProtocolError(f"record at {origin + pos}: truncated, {left} of {total} bytes")
        topic_len = (p[pos + 56] << 8) | p[pos + 57]
        born_len = (p[pos + 58] << 8) | p[pos + 59]
        store_len = (p[pos + 60] << 8) | p[pos + 61]
        body_len = _get32(p + pos + 62)
        props_len = _get32(p + pos + 66)
        strings_len = topic_len + born_len + store_len
        if verify_crc:
            if HEADER_SIZE + strings_len + body_len + props_len != total:
                raise ProtocolError(f"record at {origin + pos}: field lengths do not add up to {total}")
            crc = _get32(p + pos + 8)
            computed = _record_crc(PyMemoryView_FromMemory(<char*>p + pos + CRC_START, total - CRC_START, PyBUF_READ))
            if computed != crc:
                raise ProtocolError(
                    f"record at {origin + pos}: CRC mismatch (stored 0x{crc:08x}, computed 0x{computed:08x})")
        at = pos + HEADER_SIZE
        if (PyBytes_GET_SIZE(strings_raw) != strings_len or split_topic != topic_len or split_born != born_len
                or memcmp(PyBytes_AS_STRING(strings_raw), p + at, strings_len) != 0):
            strings_raw = buf[at:at + strings_len]
            split_topic, split_born = topic_len, born_len
            topic = strings_raw[:topic_len].decode()
            born_host = strings_raw[topic_len:topic_len + born_len].decode()
            store_host = strings_raw[topic_len + born_len:].decode()
        at += strings_len
        out.append(message_class(
            topic, buf[at:at + body_len], <int32_t><uint32_t>_get32(p + pos + 12), <int64_t>_get64(p + pos + 20),
            <int64_t>_get64(p + pos + 28), None, <int32_t><uint32_t>_get32(p + pos + 16), <int64_t>_get64(p + pos + 36),
            <int64_t>_get64(p + pos + 44), <int32_t><uint32_t>_get32(p + pos + 52), born_host, store_host, total, broker_name,
            buf[at + body_len:at + body_len + props_len],
        ))
        pos += total
    return out


def to_puts(messages, str topic, queue_id, str producer_group, put_class, new_id):
    """send_processor.to_puts: a batch's messages as ``put_class`` puts to ``topic``, their properties as
    ``put_properties`` builds them; a message naming another topic is refused."""
    cdef list puts = []
    cdef str msg_topic
    cdef dict properties
    for msg in messages:
        msg_topic = msg.topic
        if msg_topic and msg_topic != topic:
            raise BadRequestError(f"batch for topic {topic} contains a message for {msg_topic}")
        msg_id = msg.msg_id
        if not msg_id:
            msg_id = new_id()
            msg.msg_id = msg_id
        own = msg.properties
        if own:
            properties = dict(own)
            properties.pop(PROPERTY_PRODUCER_SEQUENCE, None)
        else:
            properties = {}
        if producer_group:
            properties[PROPERTY_PRODUCER_GROUP] = producer_group
        value = msg.tags
        if value:
            properties[PROPERTY_TAGS] = value
        keys = msg.keys
        if keys:
            properties[PROPERTY_KEYS] = KEY_SEPARATOR.join(keys)
        properties[PROPERTY_MSG_ID] = msg_id
        value = msg.trace_id
        if value:
            properties[PROPERTY_TRACE_ID] = value
        born = msg.born_timestamp
        puts.append(put_class(topic, queue_id, msg.body, properties, SYS_FLAG_GRAY if msg.gray else 0,
                              born if born else int(_time() * 1000), msg.born_host, 0))
    return puts


def queue_offsets(puts, next_offset, Py_ssize_t max_body):
    """dispatch.queue_offsets: each put's queue offset and per queue the offset after the batch; a run of puts to
    the queue of the put before (a SEND_BATCH: all of them) skips the dict."""
    cdef list offsets = []
    cdef dict ends = {}
    cdef Py_ssize_t body_len
    cdef int64_t offset = 0
    last_topic = last_queue = None
    for put in puts:
        topic, queue_id = put.topic, put.queue_id
        if last_topic is None or not (topic is last_topic or topic == last_topic) or queue_id != last_queue:
            if last_topic is not None:
                ends[(last_topic, last_queue)] = offset
            found = ends.get((topic, queue_id))
            offset = next_offset(topic, queue_id) if found is None else found
            last_topic, last_queue = topic, queue_id
        body_len = len(put.body)
        if body_len > max_body:
            raise MessageTooLargeError(f"message body of {body_len} bytes exceeds {max_body} bytes")
        offsets.append(offset)
        offset += 1
    if last_topic is not None:
        ends[(last_topic, last_queue)] = offset
    return offsets, ends
