# cython: language_level=3, boundscheck=False, wraparound=False
"""The blocking producer's SEND_MESSAGE in C: the request written (the compiled twins of ``encode_message_py`` and
``send_envelope_py``, client/send_wire.py) and its answer read (``send_reply_py``'s twin). Each request part is
written once, at its final size, the strings read as UTF-8 in place; keys and properties, rare on the hot path, go
through small Python helpers. The answer is read from the receive buffer in place; whatever it does not expect is
left to the general path (protobuf), so it never reads bytes otherwise than protobuf would.

Layout (protobuf wire format, protocol/proto/graymq.proto; tag byte = field number << 3 | 2 for length-delimited,
| 0 for varint; proto3 defaults left out, except a repeated or map element, always written):
- Message: topic 1, body 2, tags 3, keys 4 (repeated), properties 5 (map entry: key 1, value 2), gray 6,
  trace_id 7, msg_id 8, born_timestamp 9 (varint), born_host 10;
- SendRequest: producer_group 1, message 2 (always written), queue_id 3, producer_id 20, sequence 21 (varints;
  a negative int32/int64 as its 64-bit two's complement, ten bytes);
- Envelope: the request's head (method 1), then body 6.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.string cimport memcpy


cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object text, Py_ssize_t* size) except NULL


cdef inline Py_ssize_t _varint_size(uint64_t n) noexcept:
    cdef Py_ssize_t size = 1
    while n >= 0x80:
        n >>= 7
        size += 1
    return size


cdef inline char* _put_varint(char* p, uint64_t n) noexcept:
    while n >= 0x80:
        p[0] = <char>((n & 0x7F) | 0x80)
        p += 1
        n >>= 7
    p[0] = <char>n
    return p + 1


cdef inline Py_ssize_t _field_size(Py_ssize_t size) noexcept:
    return 0 if size == 0 else 1 + _varint_size(size) + size


cdef inline char* _put_field(char* p, char tag, const char* data, Py_ssize_t size) noexcept:
    if size == 0:
        return p
    p[0] = tag
    p = _put_varint(p + 1, size)
    memcpy(p, data, size)
    return p + size


cdef bytes _text_field(char tag, str text):
    """The field even when ``text`` is empty: a repeated string's element, a map entry's key or value."""
    cdef Py_ssize_t size
    cdef const char* data = PyUnicode_AsUTF8AndSize(text, &size)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, 1 + _varint_size(size) + size)
    cdef char* p = PyBytes_AS_STRING(out)
    p[0] = tag
    p = _put_varint(p + 1, size)
    memcpy(p, data, size)
    return out


cdef bytes _keys_and_properties(keys, properties):
    parts = [_text_field(b"\x22", key) for key in keys]
    for name, value in properties.items():
        entry = _text_field(b"\x0a", name) + _text_field(b"\x12", value)
        parts.append(b"\x2a" + _varint_bytes(len(entry)) + entry)
    return b"".join(parts)


cdef bytes _varint_bytes(uint64_t n):
    cdef char buf[10]
    cdef char* end = _put_varint(buf, n)
    return PyBytes_FromStringAndSize(buf, end - buf)


def encode_message(str topic, body, str tags, keys, properties, bint gray, str trace_id, str msg_id,
                   int64_t born_ms, str born_host):
    """The serialized ``pb.Message`` of these fields."""
    cdef bytes body_bytes = body if type(body) is bytes else bytes(body)
    cdef bytes extra = _keys_and_properties(keys, properties) if keys or properties else b""
    cdef Py_ssize_t n_topic, n_tags, n_trace, n_id, n_host
    cdef const char* s_topic = PyUnicode_AsUTF8AndSize(topic, &n_topic)
    cdef const char* s_tags = PyUnicode_AsUTF8AndSize(tags, &n_tags)
    cdef const char* s_trace = PyUnicode_AsUTF8AndSize(trace_id, &n_trace)
    cdef const char* s_id = PyUnicode_AsUTF8AndSize(msg_id, &n_id)
    cdef const char* s_host = PyUnicode_AsUTF8AndSize(born_host, &n_host)
    cdef Py_ssize_t n_body = len(body_bytes), n_extra = len(extra)
    cdef Py_ssize_t size = (_field_size(n_topic) + _field_size(n_body) + _field_size(n_tags) + n_extra
                            + (2 if gray else 0) + _field_size(n_trace) + _field_size(n_id)
                            + (1 + _varint_size(<uint64_t>born_ms) if born_ms else 0) + _field_size(n_host))
    cdef bytes out = PyBytes_FromStringAndSize(NULL, size)
    cdef char* p = PyBytes_AS_STRING(out)
    p = _put_field(p, b"\x0a", s_topic, n_topic)
    p = _put_field(p, b"\x12", PyBytes_AS_STRING(body_bytes), n_body)
    p = _put_field(p, b"\x1a", s_tags, n_tags)
    if n_extra:
        memcpy(p, PyBytes_AS_STRING(extra), n_extra)
        p += n_extra
    if gray:
        p[0] = b"\x30"
        p[1] = b"\x01"
        p += 2
    p = _put_field(p, b"\x3a", s_trace, n_trace)
    p = _put_field(p, b"\x42", s_id, n_id)
    if born_ms:
        p[0] = b"\x48"
        p = _put_varint(p + 1, <uint64_t>born_ms)
    _put_field(p, b"\x52", s_host, n_host)
    return out


def send_envelope(bytes head, str group, bytes message, int queue_id, uint64_t producer_id, int64_t sequence):
    """The request ``Envelope`` (``head`` then its body field) carrying a ``SendRequest`` of ``message``."""
    cdef Py_ssize_t n_group, n_head = len(head), n_message = len(message)
    cdef const char* s_group = PyUnicode_AsUTF8AndSize(group, &n_group)
    cdef uint64_t queue = <uint64_t><int64_t>queue_id
    cdef Py_ssize_t request = (_field_size(n_group) + 1 + _varint_size(n_message) + n_message
                               + (1 + _varint_size(queue) if queue_id else 0)
                               + (2 + _varint_size(producer_id) if producer_id else 0)
                               + (2 + _varint_size(<uint64_t>sequence) if sequence else 0))
    cdef bytes out = PyBytes_FromStringAndSize(NULL, n_head + 1 + _varint_size(request) + request)
    cdef char* p = PyBytes_AS_STRING(out)
    memcpy(p, PyBytes_AS_STRING(head), n_head)
    p[n_head] = b"\x32"
    p = _put_varint(p + n_head + 1, request)
    p = _put_field(p, b"\x0a", s_group, n_group)
    p[0] = b"\x12"
    p = _put_varint(p + 1, n_message)
    memcpy(p, PyBytes_AS_STRING(message), n_message)
    p += n_message
    if queue_id:
        p[0] = b"\x18"
        p = _put_varint(p + 1, queue)
    if producer_id:
        p[0] = <char>0xA0
        p[1] = b"\x01"
        p = _put_varint(p + 2, producer_id)
    if sequence:
        p[0] = <char>0xA8
        p[1] = b"\x01"
        _put_varint(p + 2, <uint64_t>sequence)
    return out


# -- the answer to a SEND_MESSAGE ----------------------------------------------------------------------------------
# Frame (protocol/frame.py): token, serial number, block count, block length (big-endian uint32s), then the
# Envelope: method 1, is_response 2, oneway 3, code 4 (varints), error_message 5, body 6; the body a SendResponse:
# status 1, msg_id 2, broker_name 3, queue_id 4, queue_offset 5, commit_log_offset 6, duplicate 20.
cdef enum:
    FRAME_HEAD = 16
    MSG_TOKEN = 0xFF7FF4FE
    SEND_MESSAGE = 1
    VARINT = 0
    FIXED64 = 1
    LENGTH = 2
    FIXED32 = 5


cdef inline uint64_t _be32(const unsigned char* p) noexcept:
    return (<uint64_t>p[0] << 24) | (<uint64_t>p[1] << 16) | (<uint64_t>p[2] << 8) | p[3]


cdef inline const unsigned char* _varint(const unsigned char* p, const unsigned char* end,
                                         uint64_t* value) noexcept:
    """The varint at ``p`` into ``value``; the position after it, or NULL when cut short or over ten bytes."""
    cdef uint64_t n = 0
    cdef int shift = 0
    while p < end and shift < 70:
        if shift == 63 and p[0] > 1:  # bits past the 64th: left to protobuf
            return NULL
        n |= <uint64_t>(p[0] & 0x7F) << shift
        if p[0] < 0x80:
            value[0] = n
            return p + 1
        p += 1
        shift += 7
    return NULL


cdef inline const unsigned char* _tag(const unsigned char* p, const unsigned char* end, uint64_t* tag) noexcept:
    """The field key at ``p``; NULL when cut short or no key (field number 0, over 32 bits)."""
    p = _varint(p, end, tag)
    if p == NULL or tag[0] >> 3 == 0 or tag[0] > 0xFFFFFFFF:
        return NULL
    return p


cdef inline const unsigned char* _length(const unsigned char* p, const unsigned char* end,
                                         uint64_t* size) noexcept:
    """The length prefix at ``p``; NULL when it or the bytes it counts are cut short."""
    p = _varint(p, end, size)
    if p == NULL or size[0] > <uint64_t>(end - p):
        return NULL
    return p


cdef inline const unsigned char* _skip(const unsigned char* p, const unsigned char* end, uint64_t wire) noexcept:
    """Past an unknown field's value of wire type ``wire``; NULL for a group, a bad type or a value cut short."""
    cdef uint64_t size
    if wire == VARINT:
        return _varint(p, end, &size)
    if wire == FIXED64:
        return p + 8 if end - p >= 8 else NULL
    if wire == FIXED32:
        return p + 4 if end - p >= 4 else NULL
    if wire == LENGTH:
        p = _length(p, end, &size)
        if p == NULL:
            return NULL
        return p + size
    return NULL


cdef object _utf8(const unsigned char* p, uint64_t size):
    """The text of a string field, or None when it is not UTF-8 (protobuf refuses it: the general path answers)."""
    try:
        return (<const char*>p)[:size].decode("utf-8")
    except UnicodeDecodeError:
        return None


cdef object _send_response(const unsigned char* p, const unsigned char* end):
    """``(0, msg_id, queue_offset, commit_log_offset)`` of a SendResponse, None for anything unusual."""
    cdef uint64_t tag, value = 0, queue_offset = 0, commit_log_offset = 0
    cdef object msg_id = "", text
    while p < end:
        p = _tag(p, end, &tag)
        if p == NULL:
            return None
        if tag & 7 == LENGTH and (tag >> 3) in (2, 3):
            p = _length(p, end, &value)
            if p == NULL:
                return None
            text = _utf8(p, value)
            if text is None:
                return None
            if tag >> 3 == 2:
                msg_id = text
            p += value
        elif tag & 7 == VARINT and (tag >> 3) in (1, 4, 5, 6, 20):
            p = _varint(p, end, &value)
            if tag >> 3 == 5:
                queue_offset = value
            elif tag >> 3 == 6:
                commit_log_offset = value
        elif (tag >> 3) in (1, 2, 3, 4, 5, 6, 20):  # a known field in the wrong wire type
            return None
        else:
            p = _skip(p, end, tag & 7)
        if p == NULL:
            return None
    return (0, msg_id, <int64_t>queue_offset, <int64_t>commit_log_offset)


def send_reply(bytearray buffer, Py_ssize_t size, uint64_t serial, Py_ssize_t max_frame_size):
    """The answer to the SEND_MESSAGE numbered ``serial`` when ``buffer[:size]`` is exactly its frame:
    ``(0, msg_id, queue_offset, commit_log_offset)``, or ``(code, error_message, 0, 0)`` for an error envelope;
    None for anything else (a push, a partial frame or several, a block layout or protobuf encoding this does not
    read), which the general path (frame decoder, protobuf) then answers."""
    cdef const unsigned char* p = <const unsigned char*>PyByteArray_AS_STRING(buffer)
    cdef const unsigned char* end
    cdef uint64_t tag, value = 0, method = 0, code = 0, is_response = 0
    cdef const unsigned char* body = NULL
    cdef uint64_t body_size = 0
    cdef object error_message = ""
    if size < FRAME_HEAD or size > len(buffer) or _be32(p) != MSG_TOKEN or _be32(p + 4) != serial \
            or _be32(p + 8) != 1 or _be32(p + 12) != <uint64_t>(size - FRAME_HEAD) \
            or size - FRAME_HEAD > max_frame_size:
        return None
    end = p + size
    p += FRAME_HEAD
    while p < end:
        p = _tag(p, end, &tag)
        if p == NULL:
            return None
        if tag & 7 == LENGTH and (tag >> 3) in (5, 6):
            p = _length(p, end, &value)
            if p == NULL:
                return None
            if tag >> 3 == 6:
                body, body_size = p, value
            else:
                error_message = _utf8(p, value)
                if error_message is None:
                    return None
            p += value
        elif tag & 7 == VARINT and (tag >> 3) <= 4:
            p = _varint(p, end, &value)
            if tag >> 3 == 1:
                method = value
            elif tag >> 3 == 2:
                is_response = value
            elif tag >> 3 == 4:
                code = value
        elif (tag >> 3) <= 6:
            return None
        else:
            p = _skip(p, end, tag & 7)
        if p == NULL:
            return None
    if not is_response:
        return None
    if <int32_t>code != 0:
        return (<int32_t>code, error_message, 0, 0)
    if <int32_t>method != SEND_MESSAGE:
        return None
    return _send_response(body, body + body_size) if body != NULL else (0, "", 0, 0)
