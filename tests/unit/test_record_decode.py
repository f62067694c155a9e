"""Decoding records for consumers: lazy properties, single-property lookups, the topic/host cache, positions."""

from __future__ import annotations

import pytest

from graymq.protocol.errors import ProtocolError
from graymq.protocol.record import (
    RECORD_HEADER,
    MessageExt,
    decode_record,
    encode_properties,
    encode_record,
    find_property,
    iter_records,
    make_properties,
)

pytestmark = pytest.mark.unit


def record(topic: str = "T", born_host: str = "b:1", store_host: str = "s:2", body: bytes = b"x",
           properties: bytes | None = None, queue_offset: int = 0) -> bytes:
    if properties is None:
        properties = encode_properties(make_properties(tags="A", keys=["k1", "k2"], msg_id="M", trace_id="tr"))
    return encode_record(
        topic=topic.encode(), body=body, properties=properties, queue_id=1, queue_offset=queue_offset,
        physical_offset=100, born_host=born_host.encode(), store_host=store_host.encode(),
    )


def test_single_property_reads_match_the_parsed_map_before_and_after_parsing():
    message = decode_record(record(properties=encode_properties(
        {"XTAGS": "no", "TAGS": "A", "KEYS": "k1 k2", "UNIQ_KEY": "M", "TRACE_ID": "tr", "empty": ""})))
    before = (message.tags, message.keys, message.msg_id, message.trace_id)
    assert before == ("A", ["k1", "k2"], "M", "tr")
    assert message.properties["XTAGS"] == "no" and message.properties["empty"] == ""
    assert (message.tags, message.keys, message.msg_id, message.trace_id) == before


def test_find_property_finds_only_whole_names():
    raw = encode_properties({"XTAGS": "x", "TAGS": "t", "last": "v"})
    assert find_property(raw, "XTAGS") == "x"
    assert find_property(raw, "TAGS") == "t"
    assert find_property(raw, "last") == "v"
    assert find_property(raw, "AGS") == ""
    assert find_property(b"", "TAGS") == ""


def test_a_message_without_properties_has_an_empty_map():
    message = decode_record(record(properties=b""))
    assert message.properties == {} and message.tags == "" and message.keys == []


def test_properties_set_after_decoding_replace_the_stored_ones():
    message = decode_record(record())
    message.properties = {"TAGS": "B"}
    assert message.tags == "B" and message.msg_id == ""


def test_properties_that_are_not_utf8_raise_a_protocol_error_when_read():
    message = decode_record(record(properties=b"TAGS\x01\xff\x02"))
    with pytest.raises(ProtocolError, match="UTF-8"):
        _ = message.properties
    with pytest.raises(ProtocolError, match="UTF-8"):
        _ = decode_record(record(properties=b"TAGS\x01\xff\x02")).tags


def test_records_sharing_string_bytes_but_not_their_split_decode_each_field():
    blob = b"".join([
        record("ab", "c", "d"), record("a", "bc", "d"), record("a", "b", "cd"), record("a", "b", "cd"),
        record("é", "ü", "s"), record("Té", "st", ""),
    ])
    fields = [(m.topic, m.born_host, m.store_host) for m in iter_records(blob)]
    assert fields == [("ab", "c", "d"), ("a", "bc", "d"), ("a", "b", "cd"), ("a", "b", "cd"), ("é", "ü", "s"),
                      ("Té", "st", "")]


def test_iter_records_stamps_the_broker_name_and_copies_bodies_out_of_the_buffer():
    buf = bytearray(record(body=b"one") + record(body=b"two", queue_offset=1))
    messages = list(iter_records(buf, broker_name="broker-a"))
    buf[:] = bytes(len(buf))
    assert [(m.body, m.queue_offset, m.broker_name) for m in messages] == [(b"one", 0, "broker-a"),
                                                                             (b"two", 1, "broker-a")]
    assert all(type(m.body) is bytes for m in messages)


def test_damage_is_detected_by_iteration_and_positions_in_errors_are_absolute():
    good = record(body=b"payload")
    damaged = bytearray(good)
    damaged[-3] ^= 0xFF
    with pytest.raises(ProtocolError, match=f"record at {len(good)}: CRC mismatch"):
        list(iter_records(good + bytes(damaged)))
    view = memoryview(bytes(7) + bytes(damaged))
    with pytest.raises(ProtocolError, match="record at 7: CRC mismatch"):
        decode_record(view, 7)
    with pytest.raises(ProtocolError, match="record at 7: truncated"):
        decode_record(view[: 7 + RECORD_HEADER.size], 7)


def test_decoding_a_view_at_an_offset_equals_decoding_the_bytes():
    data = record(body=b"at-offset")
    from_view = decode_record(memoryview(b"pad" + data), 3)
    assert from_view == decode_record(data)
    assert from_view.body == b"at-offset" and from_view.store_size == len(data)


def test_message_ext_built_directly_keeps_the_dataclass_signature():
    properties = make_properties(tags="PAID", msg_id="M1")
    message = MessageExt("T", b"b", 5, 42, 1000, properties, sys_flag=1, broker_name="broker-a")
    assert (message.topic, message.queue_id, message.queue_offset, message.commit_log_offset) == ("T", 5, 42, 1000)
    assert message.gray and message.tags == "PAID" and message.msg_id == "M1"
    assert message == MessageExt("T", b"b", 5, 42, 1000, dict(properties), sys_flag=1, broker_name="broker-a")
    assert message != MessageExt("T", b"b", 5, 42, 1000, {}, sys_flag=1, broker_name="broker-a")
    assert MessageExt("T", b"", 0, 0, 0).properties == {}
    assert "queue_offset=42" in repr(message)
