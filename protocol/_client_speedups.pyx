# cython: language_level=3, boundscheck=False, wraparound=False
"""The blocking producer's SEND_MESSAGE request written in C: the compiled twins of ``encode_message_py`` and
``send_envelope_py`` (client/send_wire.py). Each writes its bytes object once, at its final size, the strings read
as UTF-8 in place; keys and properties, rare on the hot path, go through small Python helpers.

Layout (protobuf wire format, protocol/proto/graymq.proto; tag byte = field number << 3 | 2 for length-delimited,
| 0 for varint; proto3 defaults left out, except a repeated or map element, always written):
- Message: topic 1, body 2, tags 3, keys 4 (repeated), properties 5 (map entry: key 1, value 2), gray 6,
  trace_id 7, msg_id 8, born_timestamp 9 (varint), born_host 10;
- SendRequest: producer_group 1, message 2 (always written), queue_id 3, producer_id 20, sequence 21 (varints;
  a negative int32/int64 as its 64-bit two's complement, ten bytes);
- Envelope: the request's head (method 1), then body 6.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport int64_t, uint64_t
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
