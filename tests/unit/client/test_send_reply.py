"""The answer to a SEND_MESSAGE read straight from the bytes received (client/send_wire.py ``send_reply``): compiled
and pure reader against the general path (frame decoder, protobuf envelope and body, the error registry) for any
bytes — well-formed answers, error envelopes, pushes, and the same bytes cut, extended or with bytes changed."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf.internal.encoder import _VarintBytes  # type: ignore[attr-defined]
from hypothesis import given, settings
from hypothesis import strategies as st

from graymq.client import send_wire
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.errors import GrayMQError, error_from_code
from graymq.protocol.frame import DEFAULT_MAX_FRAME_SIZE, FrameDecoder, encode_frame
from graymq.protocol.remoting import parse_body, parse_envelope

pytestmark = pytest.mark.unit

READERS = [pytest.param(send_wire.send_reply_py, id="pure")]
if send_wire.COMPILED is not None:
    READERS.append(pytest.param(send_wire.COMPILED.send_reply, id="compiled"))

SERIAL = 7
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
RESPONSE = st.builds(pb.SendResponse, status=st.integers(0, 3), msg_id=st.text(max_size=40),
                     broker_name=st.text(max_size=10), queue_id=INT32, queue_offset=INT64,
                     commit_log_offset=INT64, duplicate=st.booleans())
# fields a newer broker may add: (field number, wire type, value) written after the known ones; a known number
# (SendResponse.duplicate is 20) in another wire type is not an unknown field but one the readers may leave to protobuf
KNOWN_NUMBERS = {field.number for field in pb.SendResponse.DESCRIPTOR.fields}
UNKNOWN = st.lists(st.tuples(st.integers(7, 5000).filter(lambda number: number not in KNOWN_NUMBERS),
                             st.sampled_from([0, 1, 2, 5]), st.binary(max_size=9)), max_size=2)


def unknown_fields(fields: list[tuple[int, int, bytes]]) -> bytes:
    out = b""
    for number, wire, value in fields:
        out += _VarintBytes(number << 3 | wire)
        if wire == 0:
            out += _VarintBytes(int.from_bytes(value[:8], "little"))
        elif wire == 2:
            out += _VarintBytes(len(value)) + value
        else:
            out += value.ljust(8 if wire == 1 else 4, b"\0")[: 8 if wire == 1 else 4]
    return out


@st.composite
def answers(draw: Any, ok: bool = False) -> bytes:
    """A frame answering request ``SERIAL`` with a stored message (unknown fields in its envelope and body); unless
    ``ok``, also a refusal, another method's answer, a push or another serial number's."""
    body = draw(RESPONSE).SerializeToString() + unknown_fields(draw(UNKNOWN))
    head, serial = pb.Envelope(method=pb.SEND_MESSAGE, is_response=True), SERIAL
    if not ok:
        head.method = draw(st.sampled_from([pb.SEND_MESSAGE] * 4 + [pb.SEND_BATCH, pb.NOTIFY_GROUP_CHANGED]))
        head.is_response = draw(st.sampled_from([True, True, True, False]))
        head.code = draw(st.sampled_from([pb.OK] * 3 + [pb.TOPIC_NOT_EXIST, pb.NOT_LEADER, 99, -1]))
        head.error_message = draw(st.text(max_size=30))
        serial = draw(st.sampled_from([SERIAL] * 5 + [8]))
    payload = head.SerializeToString() + b"\x32" + _VarintBytes(len(body)) + body + unknown_fields(draw(UNKNOWN))
    return encode_frame(serial, payload)


@st.composite
def damaged(draw: Any) -> bytes:
    """An answer cut short, extended, or with bytes changed (its frame header included)."""
    data = bytearray(draw(answers()))
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(data) - 1))
        data[at] = draw(st.integers(0, 255))
    cut = draw(st.integers(0, len(data)))
    return bytes(data[:cut] if draw(st.booleans()) else data) + draw(st.binary(max_size=6))


def general(data: bytes) -> tuple[Any, ...] | None:
    """What the connection's general path makes of ``data``: the answer, the error it raises, or None (no answer
    to ``SERIAL`` in these bytes yet)."""
    try:
        for frame in FrameDecoder().feed(data):
            envelope = parse_envelope(frame.payload)
            if envelope.is_response and frame.serial_no == SERIAL:
                response = parse_body(envelope, response=True)
                return ("stored", response.msg_id, response.queue_offset,  # type: ignore[attr-defined]
                        response.commit_log_offset)  # type: ignore[attr-defined]
    except GrayMQError as exc:
        return type(exc), str(exc)
    return None


def outcome(reply: tuple[int, str, int, int]) -> tuple[Any, ...]:
    """A reply as the connection hands it on: the stored message, or the refusal raised."""
    if reply[0]:
        error = error_from_code(reply[0], reply[1])
        return type(error), str(error)
    return ("stored", *reply[1:])


def read(reader: Any, data: bytes) -> tuple[int, str, int, int] | None:
    buffer = bytearray(data) + bytearray(b"\xff" * 32)  # stale bytes after the read, as in the connection's buffer
    return reader(buffer, len(data), SERIAL, DEFAULT_MAX_FRAME_SIZE)  # type: ignore[no-any-return]


@pytest.mark.parametrize("reader", READERS)
@settings(max_examples=400, deadline=None)
@given(data=answers(ok=True))
def test_a_stored_message_is_read_as_the_general_path_reads_it(reader: Any, data: bytes) -> None:
    reply = read(reader, data)
    assert reply is not None  # the usual answer never falls back, unknown fields included
    assert outcome(reply) == general(data)


@pytest.mark.parametrize("reader", READERS)
@settings(max_examples=600, deadline=None)
@given(data=st.one_of(answers(), damaged(), st.binary(max_size=40)))
def test_any_bytes_are_read_as_the_general_path_reads_them_or_left_to_it(reader: Any, data: bytes) -> None:
    reply = read(reader, data)
    if reply is not None:
        assert outcome(reply) == general(data)


@pytest.mark.skipif(send_wire.COMPILED is None, reason="no compiled reply reader")
@settings(max_examples=600, deadline=None)
@given(data=st.one_of(answers(), damaged()))
def test_the_compiled_reader_answers_where_the_pure_one_does(data: bytes) -> None:
    """The compiled reader falls back only on bytes protobuf reads another way than a broker writes them."""
    compiled, pure = read(send_wire.COMPILED.send_reply, data), read(send_wire.send_reply_py, data)
    assert compiled == pure or compiled is None


@pytest.mark.parametrize("reader", READERS)
def test_a_refusal_is_its_code_and_message_and_a_push_or_partial_frame_is_left_to_the_general_path(
        reader: Any) -> None:
    refusal = encode_frame(SERIAL, pb.Envelope(method=pb.SEND_MESSAGE, is_response=True, code=pb.TOPIC_NOT_EXIST,
                                                error_message="no topic T").SerializeToString())
    assert read(reader, refusal) == (pb.TOPIC_NOT_EXIST, "no topic T", 0, 0)
    push = encode_frame(SERIAL, pb.Envelope(method=pb.NOTIFY_GROUP_CHANGED).SerializeToString())
    assert read(reader, push) is None
    stored = encode_frame(SERIAL, pb.Envelope(method=pb.SEND_MESSAGE, is_response=True, body=pb.SendResponse(
        msg_id="M", queue_offset=-1, commit_log_offset=-1).SerializeToString()).SerializeToString())
    assert read(reader, stored) == (0, "M", -1, -1)
    assert read(reader, stored[:-1]) is None and read(reader, stored + push) is None
