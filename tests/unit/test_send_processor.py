"""What the broker stores of a producer's message: the same property bytes make_properties would give."""

from __future__ import annotations

import pytest

from graymq.broker_ext.processors.send_processor import to_put_message
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.constants import PROPERTY_PRODUCER_GROUP, STRIPPED_PROPERTIES
from graymq.protocol.record import SYS_FLAG_GRAY, encode_properties, make_properties

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("fields", [
    {},
    {"tags": "TagA", "keys": ["k1", "k2"], "trace_id": "t-1", "properties": {"a": "1", "b": "2"}},
    {"properties": {"TAGS": "overridden"}, "tags": "real"},
])
def test_stored_properties_are_make_properties_in_the_same_order(fields: dict) -> None:
    msg = pb.Message(topic="T", body=b"x", msg_id="ID1", gray=True, born_timestamp=5, born_host="h:1", **fields)
    put = to_put_message(msg, 3, "PG", reconsume_times=2)
    own = {k: v for k, v in msg.properties.items() if k not in STRIPPED_PROPERTIES}  # the broker sets those itself
    expected = make_properties(tags=msg.tags, keys=list(msg.keys), msg_id="ID1", trace_id=msg.trace_id,
                               extra={**own, PROPERTY_PRODUCER_GROUP: "PG"})
    assert encode_properties(put.properties) == encode_properties(expected)
    assert (put.topic, put.queue_id, put.body, put.sys_flag, put.born_timestamp, put.born_host, put.reconsume_times) \
        == ("T", 3, b"x", SYS_FLAG_GRAY, 5, "h:1", 2)


def test_a_batch_topic_overrides_and_a_missing_msg_id_is_made() -> None:
    msg = pb.Message(body=b"x")
    put = to_put_message(msg, 0, "", topic="BATCH_TOPIC")
    assert put.topic == "BATCH_TOPIC" and len(msg.msg_id) == 32 and put.properties == {"UNIQ_KEY": msg.msg_id}
    assert put.born_timestamp > 0
