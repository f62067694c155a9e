"""The frame codec: round trips for any content and chunking; every malformed input is one ProtocolError."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graymq.protocol.errors import ProtocolError
from graymq.protocol.frame import BLOCK_SIZE, FRAME_HEADER, MSG_TOKEN, FrameDecoder, encode_frame

pytestmark = pytest.mark.unit


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, last = [], 0
    for p in points:
        pieces.append(data[last:p])
        last = p
    pieces.append(data[last:])
    return pieces


@settings(max_examples=300, deadline=None)
@given(
    payloads=st.lists(st.tuples(st.integers(0, 0xFFFFFFFF), st.binary(max_size=2048)), min_size=1, max_size=8),
    cuts=st.lists(st.integers(0, 100_000), max_size=20),
)
def test_frames_round_trip_for_any_content_and_chunking(payloads, cuts):
    stream = b"".join(encode_frame(serial, payload) for serial, payload in payloads)
    decoder = FrameDecoder()
    frames = []
    for piece in chunked(stream, cuts):
        frames.extend(decoder.feed(piece))
    decoder.eof()
    assert [(f.serial_no, f.payload) for f in frames] == payloads
    assert decoder.pending == 0


def test_large_payload_is_split_into_blocks_and_reassembled():
    payload = bytes(range(256)) * (3 * BLOCK_SIZE // 256 + 7)
    frame = encode_frame(7, payload)
    assert struct.unpack_from(">III", frame)[2] == 4
    decoder = FrameDecoder()
    out = []
    for i in range(0, len(frame), 65_537):
        out.extend(decoder.feed(frame[i : i + 65_537]))
    assert len(out) == 1 and out[0].payload == payload and out[0].serial_no == 7


@settings(max_examples=500, deadline=None)
@given(garbage=st.binary(min_size=1, max_size=512), cuts=st.lists(st.integers(0, 1000), max_size=5))
def test_random_bytes_only_ever_raise_protocol_error(garbage, cuts):
    decoder = FrameDecoder(max_frame_size=1024)
    try:
        for piece in chunked(garbage, cuts):
            decoder.feed(piece)
        decoder.eof()
    except ProtocolError:
        pass


@settings(max_examples=300, deadline=None)
@given(payload=st.binary(min_size=1, max_size=300), data=st.data())
def test_truncation_raises_protocol_error_at_eof(payload, data):
    frame = encode_frame(1, payload)
    cut = data.draw(st.integers(1, len(frame) - 1))
    decoder = FrameDecoder()
    assert decoder.feed(frame[:cut]) == []
    with pytest.raises(ProtocolError, match="truncated"):
        decoder.eof()


@settings(max_examples=500, deadline=None)
@given(payload=st.binary(max_size=300), data=st.data())
def test_bit_flips_yield_protocol_error_or_a_frame_never_anything_else(payload, data):
    frame = bytearray(encode_frame(5, payload))
    bit = data.draw(st.integers(0, len(frame) * 8 - 1))
    frame[bit // 8] ^= 1 << (bit % 8)
    decoder = FrameDecoder(max_frame_size=4096)
    try:
        decoder.feed(bytes(frame))
        decoder.eof()
    except ProtocolError:
        pass


def test_wrong_token_is_rejected_at_first_byte():
    decoder = FrameDecoder()
    with pytest.raises(ProtocolError, match="token"):
        decoder.feed(b"G")
    with pytest.raises(ProtocolError):  # poisoned afterwards
        decoder.feed(encode_frame(1, b"x"))


def test_http_request_is_rejected():
    with pytest.raises(ProtocolError, match="token"):
        FrameDecoder().feed(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")


def test_oversized_length_is_rejected_before_the_data_arrives():
    decoder = FrameDecoder()
    header = FRAME_HEADER.pack(MSG_TOKEN, 1, 1) + struct.pack(">i", 2**31 - 1)
    with pytest.raises(ProtocolError, match="exceeds the limit"):
        decoder.feed(header)


def test_negative_length_is_rejected():
    header = FRAME_HEADER.pack(MSG_TOKEN, 1, 1) + struct.pack(">i", -5)
    with pytest.raises(ProtocolError, match="negative"):
        FrameDecoder().feed(header)


def test_block_count_out_of_range_is_rejected():
    with pytest.raises(ProtocolError, match="block count"):
        FrameDecoder().feed(FRAME_HEADER.pack(MSG_TOKEN, 1, 0))
    with pytest.raises(ProtocolError, match="block count"):
        FrameDecoder().feed(FRAME_HEADER.pack(MSG_TOKEN, 1, 10**6))


def test_encoder_refuses_payload_over_the_limit():
    with pytest.raises(ProtocolError):
        encode_frame(1, b"x" * 11, max_frame_size=10)
