"""A damaged record in a pull response costs only itself: the records around it decode, its offsets are named."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graymq.client.consumer.pulled_records import DamagedRecord, decode_pulled, log_damaged
from graymq.client.message import MessageQueue
from graymq.protocol.record import encode_properties, encode_record, iter_records, make_properties

pytestmark = pytest.mark.unit
TOPIC = "T"


def record(offset: int, body: bytes = b"", tags: str = "A", properties: bytes | None = None) -> bytes:
    raw = encode_properties(make_properties(tags=tags, msg_id=f"M{offset}")) if properties is None else properties
    return encode_record(topic=TOPIC.encode(), body=body or f"body-{offset}".encode(), properties=raw, queue_id=0,
                         queue_offset=100 + offset, physical_offset=offset * 500)


def batch(n: int) -> list[bytes]:
    return [record(i) for i in range(n)]


def flip(data: bytes, at: int) -> bytes:
    damaged = bytearray(data)
    damaged[at] ^= 0xFF
    return bytes(damaged)


def offsets(messages: list) -> list[int]:
    return [m.queue_offset for m in messages]


def test_a_sound_response_decodes_as_iter_records_does():
    buf = b"".join(batch(5))
    messages, damaged = decode_pulled(buf, "b", None, 100, 105)
    assert messages == list(iter_records(buf, broker_name="b")) and damaged == []


def test_a_crc_mismatch_in_the_middle_skips_that_record_only():
    records = batch(7)
    records[3] = flip(records[3], len(records[3]) - 20)  # inside the body
    messages, damaged = decode_pulled(b"".join(records), "b", None, 100, 107)
    assert offsets(messages) == [100, 101, 102, 104, 105, 106]
    assert all(m.broker_name == "b" for m in messages)
    (bad,) = damaged
    assert (bad.first_offset, bad.last_offset, bad.offsets()) == (103, 103, "queue offset 103")
    assert "CRC mismatch" in bad.reason


def test_a_damaged_size_loses_the_boundary_and_decoding_resumes_at_the_next_sound_record():
    records = batch(6)
    records[2] = flip(records[2], 1)  # total_size: where the next record starts is unknown
    messages, damaged = decode_pulled(b"".join(records), "b", None, 100, 106)
    assert offsets(messages) == [100, 101, 103, 104, 105]
    assert [(d.first_offset, d.last_offset) for d in damaged] == [(102, 102)]


def test_a_run_of_garbage_is_reported_as_the_offsets_between_its_sound_neighbours():
    records = batch(6)
    garbage = bytes(len(records[2]) + len(records[3]))
    messages, damaged = decode_pulled(b"".join(records[:2] + [garbage] + records[4:]), "b", None, 100, 106)
    assert offsets(messages) == [100, 101, 104, 105]
    assert [d.offsets() for d in damaged] == ["queue offsets 102..103"]


def test_a_truncated_last_record_is_skipped_and_named_by_its_header():
    records = batch(4)
    buf = b"".join(records)[:-10]
    messages, damaged = decode_pulled(buf, "b", None, 100, 104)
    assert offsets(messages) == [100, 101, 102]
    (bad,) = damaged
    assert bad.offsets() == "queue offset 103" and "truncated" in bad.reason


def test_undecodable_properties_met_while_filtering_by_tag_count_as_a_damaged_record():
    records = batch(3)
    records[1] = record(1, properties=b"TAGS\x01\xff\x02")  # a sound CRC over properties that are not UTF-8
    messages, damaged = decode_pulled(b"".join(records), "b", frozenset({"A"}), 100, 103)
    assert offsets(messages) == [100, 102]
    assert [(d.first_offset, "UTF-8" in d.reason) for d in damaged] == [(101, True)]


def test_a_damaged_record_is_logged_with_topic_queue_broker_and_offset(caplog):
    with caplog.at_level(logging.ERROR, logger="graymq"):
        log_damaged(MessageQueue(TOPIC, "broker-a", 3), "h:1", [DamagedRecord(7, 7, "CRC mismatch")])
    (line,) = [r.getMessage() for r in caplog.records]
    assert "topic T queue 3 on broker broker-a (h:1) at queue offset 7: CRC mismatch" in line


@given(st.data())
def test_one_flipped_byte_anywhere_loses_exactly_the_record_it_hit(data):
    records = [record(i, body=data.draw(st.binary(min_size=1, max_size=40))) for i in range(5)]
    hit = data.draw(st.integers(0, 4))
    at = data.draw(st.integers(0, len(records[hit]) - 1))
    records[hit] = flip(records[hit], at)
    messages, damaged = decode_pulled(b"".join(records), "b", None, 100, 105)
    assert offsets(messages) == [100 + i for i in range(5) if i != hit]
    assert [(d.first_offset, d.last_offset) for d in damaged] == [(100 + hit, 100 + hit)]


def test_a_damaged_record_between_offsets_the_broker_filtered_out_is_named_by_its_header():
    records = [record(0), record(5), record(10)]  # the broker skipped the offsets of other tags
    records[1] = flip(records[1], len(records[1]) - 20)
    messages, damaged = decode_pulled(b"".join(records), "b", None, 100, 111)
    assert offsets(messages) == [100, 110]
    assert [d.offsets() for d in damaged] == ["queue offset 105"]
