# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled hot path: the per-message and per-request byte work of the broker and the client.

Each function here has a pure-Python twin of the same name and behaviour (frame.py, record.py, properties.py,
index_file.py, dispatch.py, send_processor.py), which stays the reference: tests/unit/test_native_*.py check that both give
byte-identical output and raise the same error types for the same input. ``graymq.protocol.native``
picks this module or the twins (``GRAYMQ_PURE=1`` forces the twins).

A record's CRC32 is protocol/crc.py's ``crc32`` (ISA-L's, else zlib's) called on a view of the bytes in place:
the same function as the pure path, so the stored checksum cannot drift between the two.

Cython was chosen over mypyc by a measured prototype (1 KiB bodies, CPython 3.11, shared 2-core
machine): see the module docstring of ``graymq.protocol.native`` for the figures.
"""

import struct

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.memoryview cimport PyMemoryView_FromMemory
from cpython.number cimport PyNumber_Index
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_DecodeUTF8
from cpython.buffer cimport PyBUF_READ
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

import time

from graymq.protocol.constants import (
    KEY_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_MSG_ID,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TAGS,
    PROPERTY_TRACE_ID,
    REFUSED_PROPERTIES,
    STRIPPED_PROPERTIES,
)
from graymq.protocol.crc import crc32
from graymq.protocol.errors import (
    BadRequestError,
    IllegalPropertyError,
    MessageTooLargeError,
    PropertiesTooLargeError,
    ProtocolError,
)

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
    cdef bytes t = b"", b, pr, bh = b"", out
    cdef char* p
    cdef _Header* headers = <_Header*>PyMem_Malloc(max(n, 1) * sizeof(_Header))
    if headers == NULL:
        raise MemoryError()
    topic = host = None  # the last put's: a batch's puts share them, encoded once
    try:
        for put, queue_offset in zip(puts, queue_offsets, strict=True):
            if put.topic is not topic:
                topic = put.topic
                t = topic.encode()
            if put.born_host is not host:
                host = put.born_host
                bh = host.encode()
            b, pr = _as_bytes(put.body), _properties(put.properties)
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
    """Joined first, checked after: one count of each separator over the joined text instead of four ``in`` per
    property (a separator inside a name or value adds to the count)."""
    if not properties:
        return b""
    cdef list parts = []
    for name, value in properties.items():
        parts.append(name)
        parts.append("\x01")
        parts.append(value)
        parts.append("\x02")
    cdef str joined = "".join(parts)
    cdef Py_ssize_t pairs = len(parts) >> 2
    if joined.count("\x01") != pairs or joined.count("\x02") != pairs:
        for name, value in properties.items():
            if "\x01" in name or "\x02" in name or "\x01" in value or "\x02" in value:
                raise ValueError(f"property {name!r} contains a reserved separator character")
    return joined.encode("utf-8")


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
        seed = _topic_seeds[topic] = _text_crc(f"{topic}\x01", 0)
    if not keys:
        return _entry(_text_crc(msg_id, seed), offset, stamp) if msg_id else b""
    names = keys.split(KEY_SEPARATOR)
    if msg_id:
        names.append(msg_id)
    return b"".join([_entry(_text_crc(name, seed), offset, stamp) for name in dict.fromkeys(names) if name])


cdef uint32_t _CRC_TABLE[256]


cdef void _fill_crc_table() noexcept:
    cdef uint32_t c, n, k
    for n in range(256):
        c = n
        for k in range(8):
            c = (c >> 1) ^ 0xEDB88320 if c & 1 else c >> 1
        _CRC_TABLE[n] = c


_fill_crc_table()


cdef uint32_t _text_crc(str text, uint32_t seed) except? 0:
    """``zlib.crc32(text.encode(), seed)`` a byte at a time from the string's own UTF-8, no bytes object and no
    call: key and tag hashes are short, where the call cost more than the bytes."""
    cdef Py_ssize_t n, i
    cdef const unsigned char* p = <const unsigned char*>PyUnicode_AsUTF8AndSize(text, &n)
    cdef uint32_t c = ~seed
    for i in range(n):
        c = _CRC_TABLE[(c ^ p[i]) & 0xFF] ^ (c >> 8)
    return ~c


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
    cdef bytearray block = None
    topic = queue_id = None  # the last put's queue: a run of puts to it (a SEND_BATCH: all) skips the dict
    for put, queue_offset, record_size in zip(puts, queue_offsets, sizes, strict=True):
        properties = put.properties
        tags = properties.get(PROPERTY_TAGS, "")
        hashed = tag_hashes.get(tags)
        if hashed is None:
            hashed = tag_hashes[tags] = _tag_hash(tags)
        if block is None or not (put.topic is topic or put.topic == topic) or put.queue_id != queue_id:
            topic, queue_id = put.topic, put.queue_id
            block = units.get((topic, queue_id))
            if block is None:
                block = units[(topic, queue_id)] = bytearray()
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
    return _text_crc(tags, 0) or 1


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


cdef struct _Limits:  # properties.PropertyLimits, read once per call
    Py_ssize_t count, name_size, value_size, total_size


cdef _Limits _limits(limits) except *:
    cdef _Limits out
    out.count, out.name_size = limits.count, limits.name_size
    out.value_size, out.total_size = limits.value_size, limits.total_size
    return out


def own_properties(own, str tags, keys, limits):
    """properties.own_properties_py: the producer's properties checked against ``limits``, a copy returned without
    the stripped reserved names."""
    cdef _Limits bounds = _limits(limits)
    return _own_properties(dict(own) if own else {}, tags, keys, &bounds)  # dict() of an empty protobuf map: 0.7 us


cdef dict _own_properties(dict properties, str tags, keys, _Limits* limits):
    """The check of ``own_properties`` on a dict the caller owns: the stripped names are dropped from it in
    place. No string is built unless a limit is exceeded."""
    cdef Py_ssize_t total, size, index, count = len(properties)
    cdef list stripped = None
    total = _utf8_size(tags)
    if total > limits.value_size:
        raise _value_too_large("the tag", total, limits.value_size)
    for index in range(len(keys)):  # by index: iterating a protobuf repeated field costs ~0.5 us more
        size = _utf8_size(keys[index])
        if size > limits.value_size:
            raise _value_too_large("a message key", size, limits.value_size)
        total += size
    if count > limits.count:
        raise PropertiesTooLargeError(f"the message has {count} properties, more than the {limits.count} allowed "
                                      "(max_properties)")
    for name, value in properties.items():
        size = _utf8_size(name)
        if size == 0 or size > limits.name_size:
            raise IllegalPropertyError(f"a property name of {size} bytes ({name[:NAME_SHOWN]!r}), not 1 to "
                                       f"{limits.name_size} (max_property_name_size)")
        total += size
        size = _utf8_size(value)
        if size > limits.value_size:
            raise _value_too_large(f"property {name[:NAME_SHOWN]!r} has a value", size, limits.value_size)
        total += size
        if name in _STRIPPED:
            if stripped is None:
                stripped = []
            stripped.append(name)
        elif name in _REFUSED:
            raise IllegalPropertyError(f"property {name!r} is reserved: {_REFUSED[name]}")
    if total > limits.total_size:
        raise PropertiesTooLargeError(f"the message's properties, tag and keys have {total} bytes, more than the "
                                      f"{limits.total_size} allowed (max_properties_size)")
    if stripped is not None:
        for name in stripped:
            del properties[name]
    return properties


cdef Py_ssize_t NAME_SHOWN = 40  # properties.py's
cdef frozenset _STRIPPED = STRIPPED_PROPERTIES  # typed: a set lookup in C, no module-global lookup a property
cdef dict _REFUSED = REFUSED_PROPERTIES


cdef inline Py_ssize_t _utf8_size(str text) except -1:
    cdef Py_ssize_t n
    PyUnicode_AsUTF8AndSize(text, &n)
    return n


cdef object _value_too_large(str what, Py_ssize_t size, Py_ssize_t limit):
    return PropertiesTooLargeError(f"{what} of {size} bytes, more than the {limit} allowed (max_property_value_size)")


def wire_puts(bytes request, str topic, queue_id, str producer_group, put_class, new_id, limits):
    """send_processor.to_puts_py over a SEND_BATCH body as it came: its ``messages`` read from the protobuf wire
    bytes (already parsed once, so well formed), no message object made and no field looked up by name. Their own
    properties keep the order they were sent in; each message's are checked against ``limits`` (a
    ``PropertyLimits``) before any put is returned."""
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(request)
    cdef Py_ssize_t pos = 0, end = PyBytes_GET_SIZE(request), size
    cdef uint64_t key
    cdef list puts = []
    cdef _Limits bounds = _limits(limits)
    while pos < end:
        _varint(p, &pos, end, &key)
        if key == (4 << 3 | 2):  # messages = 4, length-delimited
            size = _length(p, &pos, end)
            puts.append(_wire_put(p, pos, pos + size, topic, queue_id, producer_group, put_class, new_id, &bounds))
            pos += size
        else:
            _skip(p, &pos, end, key)
    return puts


cdef object _wire_put(const unsigned char* p, Py_ssize_t pos, Py_ssize_t end, str topic, queue_id,
                      str producer_group, put_class, new_id, _Limits* limits):
    """One ``Message`` of the wire as ``to_puts_py`` makes its put."""
    cdef uint64_t key, value
    cdef Py_ssize_t size
    cdef str msg_topic = "", tags = "", trace_id = "", msg_id = "", born_host = ""
    cdef object body = b""
    cdef list keys = []
    cdef dict properties = {}
    cdef bint gray = False
    cdef int64_t born = 0
    while pos < end:
        _varint(p, &pos, end, &key)
        if key & 7 == 2:
            size = _length(p, &pos, end)
            field = key >> 3
            if field == 2:
                body = PyBytes_FromStringAndSize(<const char*>p + pos, size)
            elif field == 5:
                _wire_entry(p, pos, pos + size, properties)
            elif field == 1 or field == 3 or field == 4 or field == 7 or field == 8 or field == 10:  # strings
                text = PyUnicode_DecodeUTF8(<const char*>p + pos, size, NULL)
                if field == 1:
                    msg_topic = text
                elif field == 3:
                    tags = text
                elif field == 4:
                    keys.append(text)
                elif field == 7:
                    trace_id = text
                elif field == 8:
                    msg_id = text
                elif field == 10:
                    born_host = text
            pos += size
        elif key == (6 << 3):
            _varint(p, &pos, end, &value)
            gray = value != 0
        elif key == (9 << 3):
            _varint(p, &pos, end, &value)
            born = <int64_t>value
        else:
            _skip(p, &pos, end, key)
    if msg_topic and msg_topic != topic:
        raise BadRequestError(f"batch for topic {topic} contains a message for {msg_topic}")
    _own_properties(properties, tags, keys, limits)
    if producer_group:
        properties[PROPERTY_PRODUCER_GROUP] = producer_group
    if tags:
        properties[PROPERTY_TAGS] = tags
    if keys:
        properties[PROPERTY_KEYS] = KEY_SEPARATOR.join(keys)
    properties[PROPERTY_MSG_ID] = msg_id or new_id()
    if trace_id:
        properties[PROPERTY_TRACE_ID] = trace_id
    return put_class(topic, queue_id, body, properties, SYS_FLAG_GRAY if gray else 0,
                     born if born else int(_time() * 1000), born_host, 0)


cdef int _wire_entry(const unsigned char* p, Py_ssize_t pos, Py_ssize_t end, dict into) except -1:
    """A ``map<string, string>`` entry (key 1, value 2; a missing one is empty) into ``into``."""
    cdef uint64_t key
    cdef Py_ssize_t size
    name = value = ""
    while pos < end:
        _varint(p, &pos, end, &key)
        if key == (1 << 3 | 2) or key == (2 << 3 | 2):
            size = _length(p, &pos, end)
            text = PyUnicode_DecodeUTF8(<const char*>p + pos, size, NULL)
            if key >> 3 == 1:
                name = text
            else:
                value = text
            pos += size
        else:
            _skip(p, &pos, end, key)
    into[name] = value
    return 0


cdef int _varint(const unsigned char* p, Py_ssize_t* pos, Py_ssize_t end, uint64_t* out) except -1:
    cdef uint64_t value = 0
    cdef int shift = 0
    cdef unsigned char byte
    while pos[0] < end and shift < 64:
        byte = p[pos[0]]
        pos[0] += 1
        value |= <uint64_t>(byte & 0x7F) << shift
        if byte < 0x80:
            out[0] = value
            return 0
        shift += 7
    raise BadRequestError("undecodable SendBatchRequest body: a varint runs past its end")


cdef Py_ssize_t _length(const unsigned char* p, Py_ssize_t* pos, Py_ssize_t end) except -1:
    cdef uint64_t size
    _varint(p, pos, end, &size)
    if size > <uint64_t>(end - pos[0]):
        raise BadRequestError("undecodable SendBatchRequest body: a field runs past its end")
    return <Py_ssize_t>size


cdef int _skip(const unsigned char* p, Py_ssize_t* pos, Py_ssize_t end, uint64_t key) except -1:
    """Past a field this decoder does not read (its wire type says how long it is)."""
    cdef uint64_t ignored
    cdef int wire_type = key & 7
    if wire_type == 0:
        _varint(p, pos, end, &ignored)
    elif wire_type == 2:
        pos[0] += _length(p, pos, end)
    elif (wire_type == 1 or wire_type == 5) and end - pos[0] >= (8 if wire_type == 1 else 4):
        pos[0] += 8 if wire_type == 1 else 4
    else:
        raise BadRequestError(f"undecodable SendBatchRequest body: wire type {wire_type} at byte {pos[0]}")
    return 0


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
