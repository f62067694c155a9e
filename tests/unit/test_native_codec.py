"""The compiled hot path (graymq.protocol._speedups) against its pure-Python reference: for the same input,
byte-identical frames, records, properties sections, key-index entries and decoded batches, and the same
error type (with the same message where the pure one names positions) on bad input."""

from __future__ import annotations

import dataclasses
import itertools
import struct
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graymq.broker_ext.processors.send_processor import to_puts_py
from graymq.broker_ext.store.dispatch import place_puts_py, queue_offsets_py
from graymq.broker_ext.store.index_file import index_entries_py
from graymq.broker_ext.store.message_store import AppendResult, PutMessage
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol import native
from graymq.protocol.errors import BadRequestError, MessageTooLargeError, PropertyError, ProtocolError
from graymq.protocol.frame import BLOCK_SIZE, encode_frame_py, parse_frame_py
from graymq.protocol.properties import PropertyLimits
from graymq.protocol.record import (
    MessageExt,
    decode_records_py,
    encode_properties_py,
    encode_puts_py,
    encode_record_py,
)

pytestmark = [
    pytest.mark.unit,
    pytest.mark.skipif(native.SPEEDUPS is None, reason=f"no compiled hot path: {native.REASON}"),
]
compiled: Any = native.SPEEDUPS

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x01\x02"), max_size=20)
records = st.fixed_dictionaries({
    "topic": st.binary(max_size=40), "body": st.binary(max_size=3000), "properties": st.binary(max_size=200),
    "queue_id": INT32, "queue_offset": INT64, "physical_offset": INT64, "sys_flag": INT32,
    "born_timestamp": INT64, "store_timestamp": INT64, "reconsume_times": INT32,
    "born_host": st.binary(max_size=30), "store_host": st.binary(max_size=30),
})


def same_outcome(pure: Callable[..., Any], fast: Callable[..., Any], *args: Any,
                 view: Callable[[Any], Any] = lambda result: result, **kwargs: Any) -> Any:
    """Both give equal results (compared as ``view`` shows them), or both raise the same error type (and message,
    for ProtocolError)."""
    try:
        expected = pure(*args, **kwargs)
    except (ProtocolError, ValueError, struct.error, UnicodeError) as exc:
        with pytest.raises(type(exc)) as raised:
            fast(*args, **kwargs)
        if isinstance(exc, ProtocolError):
            assert str(raised.value) == str(exc)
        return None
    assert view(fast(*args, **kwargs)) == view(expected)
    return expected


def stored_fields(messages: list[MessageExt]) -> list[tuple[object, ...]]:
    """Decoded records as stored: the properties section undecoded (a damaged one fails only when it is read)."""
    return [(m.topic, m.body, m.queue_id, m.queue_offset, m.commit_log_offset, m._raw_properties,
             m._properties if m._raw_properties == b"" else None, m.sys_flag, m.born_timestamp, m.store_timestamp,
             m.reconsume_times, m.born_host, m.store_host, m.store_size, m.broker_name) for m in messages]


@given(serial_no=st.integers(-1, 2**32), payload=st.binary(max_size=5000), limit=st.integers(0, 6000))
def test_frames_are_byte_identical(serial_no: int, payload: bytes, limit: int) -> None:
    same_outcome(encode_frame_py, compiled.encode_frame, serial_no, payload, limit)


def test_a_frame_over_one_block_is_split_the_same_way() -> None:
    for size in (BLOCK_SIZE, BLOCK_SIZE + 1, 2 * BLOCK_SIZE, 2 * BLOCK_SIZE + 7):
        payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
        assert compiled.encode_frame(9, payload) == encode_frame_py(9, payload)


@settings(max_examples=300)
@given(payloads=st.lists(st.binary(max_size=300), min_size=1, max_size=4), cut=st.integers(0, 2000),
       garbage=st.binary(max_size=16), flip=st.integers(0, 12 * 8), max_blocks=st.integers(1, 3))
def test_frame_parsing_agrees_on_whole_cut_and_damaged_streams(payloads: list[bytes], cut: int, garbage: bytes,
                                                               flip: int, max_blocks: int) -> None:
    stream = bytearray(b"".join(encode_frame_py(n, p) for n, p in enumerate(payloads)))
    assert same_outcome(parse_frame_py, compiled.parse_frame, stream, 0, 1 << 20, 4096) is not None
    same_outcome(parse_frame_py, compiled.parse_frame, stream[:cut], 0, 1 << 20, 4096)
    same_outcome(parse_frame_py, compiled.parse_frame, bytearray(garbage), 0, 1 << 20, 4096)
    damaged = bytearray(stream)
    damaged[flip // 8] ^= 1 << (flip % 8)
    same_outcome(parse_frame_py, compiled.parse_frame, damaged, 0, 200, max_blocks)
    multi = bytearray(stream[:12]) + b"".join(struct.pack(">i", len(p)) + p for p in payloads[:1]) * 3
    multi[8:12] = struct.pack(">I", 3)
    assert same_outcome(parse_frame_py, compiled.parse_frame, multi, 0, 1 << 20, 4096) is not None


@settings(max_examples=300)
@given(fields=records)
def test_records_are_byte_identical(fields: dict[str, Any]) -> None:
    same_outcome(encode_record_py, compiled.encode_record, **fields)


@given(fields=records, name=st.sampled_from(["queue_id", "queue_offset", "reconsume_times", "sys_flag"]),
       value=st.one_of(st.integers(2**31, 2**70), st.integers(-(2**70), -(2**31) - 1), st.just(1.5)))
def test_a_field_out_of_range_is_a_struct_error_on_both(fields: dict[str, Any], name: str, value: Any) -> None:
    same_outcome(encode_record_py, compiled.encode_record, **{**fields, name: value})


ANY_TEXT = st.text(max_size=20)  # separators and lone surrogates included: both must refuse them alike
puts = st.builds(
    PutMessage, topic=st.one_of(TEXT, ANY_TEXT), queue_id=st.one_of(INT32, st.just(2**31)),
    body=st.binary(max_size=2000),
    properties=st.dictionaries(st.one_of(TEXT, ANY_TEXT), TEXT, max_size=4), sys_flag=INT32,
    born_timestamp=st.one_of(INT64, st.just(-(2**63) - 1)), born_host=TEXT, reconsume_times=INT32,
)


@settings(max_examples=300)
@given(batch=st.lists(puts, min_size=1, max_size=6), start=st.one_of(st.integers(0, 2**40), st.just(2**63 - 100)),
       stamp=INT64, host=st.binary(max_size=30), extra_offset=st.booleans())
def test_batches_of_put_messages_are_byte_identical(batch: list[PutMessage], start: int, stamp: int, host: bytes,
                                                    extra_offset: bool) -> None:
    """One buffer and the sizes, or the same error type first (a bad field, a surrogate, a separator, an offset
    past int64, one queue offset too many)."""
    offsets = list(range(len(batch) + extra_offset))
    outcome = same_outcome(encode_puts_py, compiled.encode_puts, batch, offsets, start, stamp, host)
    if outcome is not None:
        data, sizes = outcome
        assert len(data) == sum(sizes)


@given(properties=st.dictionaries(TEXT, TEXT, max_size=6), bad=st.sampled_from(["", "a\x01", "b\x02c"]))
def test_properties_sections_are_byte_identical(properties: dict[str, str], bad: str) -> None:
    same_outcome(encode_properties_py, compiled.encode_properties, properties)
    same_outcome(encode_properties_py, compiled.encode_properties, {**properties, "k": bad})


@given(topic=TEXT, keys=st.lists(TEXT, max_size=4), msg_id=TEXT, offset=INT64, stamp=INT64)
def test_key_index_entries_are_byte_identical(topic: str, keys: list[str], msg_id: str, offset: int,
                                               stamp: int) -> None:
    properties = {"TAGS": "t"}
    if keys:
        properties["KEYS"] = " ".join(keys)
    if msg_id:
        properties["UNIQ_KEY"] = msg_id
    assert compiled.index_entries(topic, properties, offset, stamp) == index_entries_py(topic, properties, offset,
                                                                                         stamp)


placed = st.builds(
    PutMessage, topic=st.sampled_from(["T", "Ü", "T2"]), queue_id=st.integers(0, 3), body=st.just(b""),
    properties=st.fixed_dictionaries({}, optional={"TAGS": st.sampled_from(["", "a", "b"]),
                                                   "KEYS": st.lists(TEXT, max_size=3).map(" ".join),
                                                   "UNIQ_KEY": TEXT}),
)


@settings(max_examples=300)
@given(batch=st.lists(placed, min_size=1, max_size=8), sizes=st.lists(st.integers(70, 2**31 - 1), min_size=8,
       max_size=8), start=st.integers(0, 2**62), stamp=st.integers(0, 2**62))
def test_placed_batches_give_identical_units_entries_and_results(batch: list[PutMessage], sizes: list[int],
                                                                  start: int, stamp: int) -> None:
    """The consume-queue units per queue (in order), the key-index entries and each message's AppendResult."""
    queue_offsets = list(range(100, 100 + len(batch)))
    args = (batch, queue_offsets, sizes[:len(batch)], start, stamp, AppendResult)
    units, entries, results = compiled.place_puts(*args)
    expected_units, expected_entries, expected_results = place_puts_py(*args)
    assert {key: bytes(block) for key, block in units.items()} == \
        {key: bytes(block) for key, block in expected_units.items()}
    assert list(units) == list(expected_units)
    assert entries == expected_entries
    assert results == expected_results and all(type(r) is AppendResult for r in results)


queued = st.builds(
    PutMessage, topic=st.sampled_from(["T", "U", "bad"]), queue_id=st.integers(0, 2), body=st.binary(max_size=20),
    properties=st.just({}),
)


@settings(max_examples=300)
@given(batch=st.lists(queued, min_size=1, max_size=10), max_body=st.integers(0, 25))
def test_queue_offsets_agree_for_runs_and_interleaved_queues(batch: list[PutMessage], max_body: int) -> None:
    """The same offsets and per-queue ends (in the same order), or the same error first: a body too large, or
    the one ``next_offset`` raises for a new queue it refuses."""
    def next_offset(topic: str, queue_id: int) -> int:
        if topic == "bad":
            raise ValueError(f"no queue {topic}/{queue_id}")
        return 1000 * queue_id + len(topic)

    outcomes: list[Any] = []
    for queue_offsets in (queue_offsets_py, compiled.queue_offsets):
        try:
            offsets, ends = queue_offsets(batch, next_offset, max_body)
        except (ValueError, MessageTooLargeError) as exc:
            outcomes.append((type(exc), str(exc)))
            continue
        outcomes.append((offsets, list(ends.items())))
    assert outcomes[0] == outcomes[1]


sent = st.builds(
    pb.Message, topic=st.sampled_from(["", "T", "U"]), body=st.binary(max_size=50), tags=TEXT,
    keys=st.lists(TEXT, max_size=3), msg_id=st.sampled_from(["", "7F00AA"]), trace_id=TEXT, gray=st.booleans(),
    born_timestamp=st.sampled_from([0, 1, 2**62]), born_host=TEXT,
    properties=st.dictionaries(st.sampled_from(["a", "PSEQ", "TAGS", "Ü", "", "DELAY", "RETRY_TOPIC"]), TEXT,
                               max_size=3),
)
limits = st.builds(PropertyLimits, count=st.integers(1, 4), name_size=st.integers(1, 12),
                   value_size=st.integers(1, 30), total_size=st.integers(1, 120))


@settings(max_examples=300)
@given(batch=st.lists(sent, min_size=1, max_size=6), group=st.sampled_from(["", "g"]), queue_id=INT32,
       pid=st.sampled_from([0, 2**64 - 1]), limits=limits)
def test_batches_of_sent_messages_become_identical_puts(batch: list[pb.Message], group: str, queue_id: int,
                                                         pid: int, limits: PropertyLimits) -> None:
    """The same PutMessages from a SEND_BATCH read as messages (the reference) and from its wire bytes (the
    compiled ``wire_puts``): a missing msg id generated, a missing born time taken from the clock, a message for
    another topic, or properties out of ``limits`` or reserved, refused alike. Own
    properties compare as maps (the wire keeps their sending order)."""
    raw = pb.SendBatchRequest(producer_group=group, topic="T", queue_id=queue_id, messages=batch, producer_id=pid,
                              sequence=7).SerializeToString()
    outcomes: list[Any] = []
    for to_puts in (lambda ids: to_puts_py(pb.SendBatchRequest.FromString(raw).messages, "T", queue_id, group,
                                           PutMessage, ids, limits),
                    lambda ids: compiled.wire_puts(raw, "T", queue_id, group, PutMessage, ids, limits)):
        new_id = (f"ID{n}" for n in itertools.count()).__next__
        before = int(time.time() * 1000)
        try:
            puts = to_puts(new_id)
        except PropertyError:  # which of two bad properties is named first follows the map's order: its own
            outcomes.append(PropertyError)  # texts are compared in test_message_properties.py
            continue
        except BadRequestError as exc:
            outcomes.append(str(exc))
            continue
        after = int(time.time() * 1000)
        for original, put in zip(batch, puts, strict=True):
            assert original.born_timestamp or before <= put.born_timestamp <= after
        outcomes.append([dataclasses.replace(p, born_timestamp=m.born_timestamp) for p, m in zip(puts, batch,
                                                                                                 strict=True)])
    assert outcomes[0] == outcomes[1]


@settings(max_examples=200)
@given(junk=st.binary(max_size=40))
def test_a_damaged_batch_body_is_a_bad_request_or_puts_never_a_crash(junk: bytes) -> None:
    """Bytes the parser would refuse never reach ``wire_puts`` (the request is parsed first); still, any bytes
    give puts or a BadRequestError (or a UnicodeError on a bad text), never a read past the end."""
    try:
        compiled.wire_puts(junk, "T", 0, "g", PutMessage, lambda: "ID", PropertyLimits())
    except (BadRequestError, UnicodeError):
        pass


@given(batch=st.lists(records, min_size=1, max_size=5), flip=st.integers(0, 10**6), cut=st.integers(0, 10**5),
       verify=st.booleans())
def test_decoded_batches_are_identical(batch: list[dict[str, Any]], flip: int, cut: int, verify: bool) -> None:
    for fields in batch:  # what a store writes: sizes in range, text fields UTF-8
        fields.update(topic=b"T\xc3\xa9", born_host=fields["born_host"].hex().encode(), store_host=b"h:1",
                      properties=b"TAGS\x01" + fields["properties"].hex().encode() + b"\x02")
    data = b"".join(encode_record_py(**fields) for fields in batch)
    whole = same_outcome(decode_records_py, compiled.decode_records, data, 0, len(data), verify, 0, "b", MessageExt)
    assert [m.body for m in whole] == [f["body"] for f in batch]
    assert [m.tags for m in whole] == [f["properties"][5:-1].decode() for f in batch]
    damaged = bytearray(data)
    damaged[flip % len(data)] ^= 0x10
    same_outcome(decode_records_py, compiled.decode_records, bytes(damaged), 0, len(data), verify, 5, "b",
                 MessageExt, view=stored_fields)
    same_outcome(decode_records_py, compiled.decode_records, data[:cut], 0, min(cut, len(data)), True, 0, "",
                 MessageExt)
