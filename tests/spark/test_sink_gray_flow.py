"""A gray streaming stage writes only to the target topic's gray queues, a normal one only to its normal queues."""

from __future__ import annotations

import pytest

from graymq.client.spark.options import GRAY_FLAG_CONF, with_conf_gray_flag
from graymq.client.sync import SyncProducer
from tests.spark.helpers import send
from tests.spark.sink_helpers import bodies, stored_rows

pytestmark = pytest.mark.spark
SOURCE, TARGET = "SINK_FLOW_A", "SINK_FLOW_B"
GROUP = "SINK_FLOW_STAGE"


def run_stage(spark, ns_url: str, gray: bool, checkpoint: str) -> None:
    """Read SOURCE on the side, enrich, write TARGET on the same side (``grayFlag`` from the Spark conf)."""
    spark.conf.set(GRAY_FLAG_CONF, str(gray).lower())
    try:
        source = with_conf_gray_flag(spark, {"nameserver": ns_url, "topic": SOURCE, "group": GROUP})
        sink = with_conf_gray_flag(spark, {"nameserver": ns_url, "topic": TARGET, "producerGroup": "SINK_FLOW"})
    finally:
        spark.conf.unset(GRAY_FLAG_CONF)
    frame = spark.readStream.format("graymq").options(**source).load()
    enriched = frame.selectExpr("concat(body, cast('+' as binary)) as body", "tags as tag", "keys",
                                "map('source_msg_id', msg_id) as properties")
    query = (enriched.writeStream.format("graymq").options(**sink).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(120), "availableNow run did not finish"
    finally:
        query.stop()


def test_gray_rows_reach_only_the_gray_queues_of_the_next_topic_and_normal_rows_the_normal_ones(
        cluster, spark, tmp_path):
    cluster.add_broker("broker-a")
    cluster.add_broker("broker-b")
    cluster.create_topic(SOURCE, 4, 2)
    cluster.create_topic(TARGET, 6, 2)
    producer = SyncProducer("SINK_FLOW_PRODUCERS", cluster.ns_url)
    producer.start()
    try:
        send(producer, SOURCE, 30, gray=True, tag="PAID")  # v2's messages: g0..g29
        send(producer, SOURCE, 40, gray=False, tag="PAID")  # v1's: n0..n39
    finally:
        producer.stop()

    run_stage(spark, cluster.ns_url, True, str(tmp_path / "gray"))
    run_stage(spark, cluster.ns_url, False, str(tmp_path / "normal"))

    gray_rows = stored_rows(spark, cluster.ns_url, TARGET, gray=True)
    normal_rows = stored_rows(spark, cluster.ns_url, TARGET, gray=False)
    assert bodies(gray_rows) == {f"g{i}+": 1 for i in range(30)}, "every v2 row once, in the gray queues only"
    assert bodies(normal_rows) == {f"n{i}+": 1 for i in range(40)}, "every v1 row once, in the normal queues only"
    assert all(r.gray and r.queue_id in (0, 5) for r in gray_rows), "stored as gray messages in gray queues"
    assert not any(r.gray for r in normal_rows)
    assert all(r.tags == "PAID" and "source_msg_id" in r.properties for r in gray_rows + normal_rows)
