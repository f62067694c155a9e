"""The sink's pure parts: options, columns and rows to messages, a task's identity, queues and numbers."""

from __future__ import annotations

import pytest
from pyspark.sql.types import ArrayType, BinaryType, MapType, StringType, StructField, StructType

from graymq.client.message import MessageQueue
from graymq.client.spark.sink_options import DEFAULT_PRODUCER_GROUP, SinkOptions
from graymq.client.spark.sink_schema import SinkColumns
from graymq.client.spark.sink_task import SEQUENCE_BITS, TaskIdentity
from graymq.protocol.errors import ConfigError

pytestmark = pytest.mark.spark
NS = "http://127.0.0.1:9876"
QUEUES = [MessageQueue("T", b, q) for b in ("broker-a", "broker-b") for q in (1, 2, 3)]


def test_options_defaults_case_and_errors() -> None:
    options = SinkOptions.parse({"NameServer": NS, "TOPIC": "OUT", "grayflag": "TRUE", "checkpointLocation": "/cp"})
    assert (options.topic, options.gray, options.producer_group) == ("OUT", True, DEFAULT_PRODUCER_GROUP)
    assert SinkOptions.parse({"nameserver": NS, "sendTimeoutMs": "500"}).send_timeout_s == 0.5
    for bad, error in [({"topic": "OUT"}, "option nameserver is required"),
                       ({"nameserver": NS, "topic": "bad topic"}, "option topic"),
                       ({"nameserver": NS, "batchMaxMessages": "0"}, "batchMaxMessages='0' must be > 0"),
                       ({"nameserver": NS, "retryTimes": "-1"}, "retryTimes"),
                       ({"nameserver": NS, "grayFlag": "maybe"}, "not a boolean"),
                       ({"nameserver": NS, "group": "G"}, "unknown graymq sink option")]:
        with pytest.raises(ConfigError, match=error):
            SinkOptions.parse(bad)


def test_the_lane_option_names_the_side_of_the_writes() -> None:
    assert SinkOptions.parse({"nameserver": NS, "LANE": "v3"}).side == "v3"
    assert SinkOptions.parse({"nameserver": NS, "lane": "gray"}).side is True
    assert SinkOptions.parse({"nameserver": NS, "grayFlag": "true", "lane": ""}).side is True
    assert SinkOptions.parse({"nameserver": NS}).side is False
    for bad, error in [({"grayFlag": "false", "lane": "v3"}, r"^options grayFlag=false and lane='v3' contradict"),
                       ({"lane": "v3!"}, r"^option lane: invalid lane name 'v3!'")]:
        with pytest.raises(ConfigError, match=error):
            SinkOptions.parse({"nameserver": NS, **bad})


def test_columns_are_found_by_name_and_rows_become_messages() -> None:
    schema = StructType([
        StructField("extra", StringType()), StructField("body", StringType()), StructField("tags", StringType()),
        StructField("keys", ArrayType(StringType(), False)),
        StructField("properties", MapType(StringType(), StringType())),
        StructField("sharding_key", StringType()), StructField("topic", StringType()),
    ])
    columns = SinkColumns.check(schema, None)
    message = columns.message(("x", "héllo", "PAID", ["k1"], {"a": "b"}, "order-1", "OUT"), None)
    assert (message.topic, message.body, message.tags, message.keys, message.properties, message.sharding_key) == (
        "OUT", "héllo".encode(), "PAID", ["k1"], {"a": "b"}, "order-1")
    nulls = columns.message((None, b"\x00", None, None, None, None, None), "DEFAULT")
    assert (nulls.topic, nulls.tags, nulls.keys, nulls.properties, nulls.sharding_key) == ("DEFAULT", "", [], {}, None)
    with pytest.raises(ConfigError, match="a row has a null body"):
        columns.message((None, None, None, None, None, None, "OUT"), None)
    body_only = SinkColumns.check(StructType([StructField("body", BinaryType())]), "OUT")
    assert body_only.message((bytearray(b"b"),), "OUT").body == b"b"


def test_both_tag_columns_or_no_topic_at_all_are_refused() -> None:
    with pytest.raises(ConfigError, match="columns tag and tags both given"):
        SinkColumns.check(StructType([StructField(n, StringType()) for n in ("body", "tag", "tags")]), "OUT")
    with pytest.raises(ConfigError, match="no topic"):
        SinkColumns.check(StructType([StructField("body", StringType())]), None)


def test_a_task_identity_gives_the_same_producer_queues_numbers_and_ids_on_every_attempt() -> None:
    task = TaskIdentity("query-1", 7, 3)
    again = TaskIdentity("query-1", 7, 3)
    assert task.producer_id == again.producer_id == TaskIdentity("query-1", 8, 3).producer_id
    assert task.producer_id != TaskIdentity("query-1", 7, 4).producer_id != TaskIdentity("query-2", 7, 3).producer_id
    assert task.queue(QUEUES, None) == again.queue(QUEUES, None) == QUEUES[(3 + 7) % 6]
    assert task.queue(QUEUES, "order-1") == TaskIdentity("other", 0, 0).queue(QUEUES, "order-1"), "key decides"
    assert task.sequence(2) == 7 << SEQUENCE_BITS | 2 < TaskIdentity("query-1", 8, 3).sequence(0)
    ids = task.msg_ids(QUEUES[0], task.sequence(0), 3)
    assert ids == again.msg_ids(QUEUES[0], again.sequence(0), 3) and len(set(ids)) == 3
    assert all(len(i) == 32 and i == i.upper() for i in ids)
    assert ids != task.msg_ids(QUEUES[0], task.sequence(1), 3)
