"""The stored record layout: round trip, CRC over everything after the CRC field, damage detection."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graymq.protocol.errors import ProtocolError
from graymq.protocol.record import (
    RECORD_HEADER,
    SYS_FLAG_GRAY,
    check_record,
    decode_record,
    encode_properties,
    encode_record,
    iter_records,
    make_properties,
)

pytestmark = pytest.mark.unit

text = st.text(alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=20)


def sample(body: bytes = b"hello", props: dict[str, str] | None = None) -> bytes:
    properties = make_properties(tags="TagA", keys=["k1", "k2"], msg_id="m1", trace_id="t1", extra=props or {})
    return encode_record(
        topic=b"TOPIC_V_ORDER", body=body, properties=encode_properties(properties), queue_id=5,
        queue_offset=42, physical_offset=1000, sys_flag=SYS_FLAG_GRAY, born_timestamp=1, store_timestamp=2,
        reconsume_times=3, born_host=b"127.0.0.1:1", store_host=b"127.0.0.1:2",
    )


def test_record_round_trips_every_field():
    m = decode_record(sample())
    assert (m.topic, m.body, m.queue_id) == ("TOPIC_V_ORDER", b"hello", 5)
    assert (m.queue_offset, m.commit_log_offset) == (42, 1000)
    assert m.gray and m.tags == "TagA" and m.keys == ["k1", "k2"] and m.msg_id == "m1" and m.trace_id == "t1"
    assert (m.born_timestamp, m.store_timestamp, m.reconsume_times) == (1, 2, 3)
    assert (m.born_host, m.store_host) == ("127.0.0.1:1", "127.0.0.1:2")
    assert m.store_size == len(sample())


@settings(max_examples=200, deadline=None)
@given(body=st.binary(max_size=512), props=st.dictionaries(text.filter(bool), text, max_size=4))
def test_records_round_trip_for_any_body_and_properties(body, props):
    props = {k: v for k, v in props.items() if k not in {"TAGS", "KEYS", "UNIQ_KEY", "TRACE_ID"}}
    record = sample(body, props)  # a dict: a property may be named like a parameter ("body")
    m = decode_record(record)
    assert m.body == body
    for k, v in props.items():
        assert m.properties[k] == v


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_any_bit_flip_after_the_size_field_is_detected(data):
    record = bytearray(sample(b"x" * 50))
    bit = data.draw(st.integers(32, len(record) * 8 - 1))
    record[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(ProtocolError):
        check_record(bytes(record))


def test_concatenated_records_iterate_and_truncation_is_an_error():
    blob = sample(b"a") + sample(b"bb")
    assert [m.body for m in iter_records(blob)] == [b"a", b"bb"]
    with pytest.raises(ProtocolError, match="truncated"):
        list(iter_records(blob[:-1]))
    with pytest.raises(ProtocolError, match="header needs"):
        check_record(blob[: RECORD_HEADER.size - 1])


def test_separator_in_property_is_refused():
    with pytest.raises(ValueError, match="separator"):
        encode_properties({"a\x01": "b"})
