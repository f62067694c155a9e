"""A gray streaming stage writes only to the target topic's gray queues, a normal one only to its normal queues
(the example stage jobs/order_enrich.py, ORDERS → ORDERS_ENRICHED)."""

from __future__ import annotations

import json

import pytest

from graymq.client import Message
from graymq.client.spark.options import GRAY_FLAG_CONF, with_conf_gray_flag
from graymq.client.sync import SyncProducer
from jobs.order_enrich import pipeline
from tests.spark.sink_helpers import bodies, stored_rows

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]  # two brokers, two stages: minutes on a busy machine
SOURCE, TARGET = "SINK_FLOW_ORDERS", "SINK_FLOW_ENRICHED"
GROUP = "SINK_FLOW_STAGE"


def run_stage(spark, ns_url: str, gray: bool, checkpoint: str) -> None:
    """What ``StreamingJob`` starts for the side, run until the source is drained (``grayFlag`` from the conf)."""
    spark.conf.set(GRAY_FLAG_CONF, str(gray).lower())
    try:
        source = with_conf_gray_flag(spark, {"nameserver": ns_url, "topic": SOURCE, "group": GROUP})
    finally:
        spark.conf.unset(GRAY_FLAG_CONF)
    frame = spark.readStream.format("graymq").options(**source).load()
    query = (pipeline(ns_url, TARGET, "SINK_FLOW")(frame, source["grayFlag"] == "true")
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(120), "availableNow run did not finish"
    finally:
        query.stop()


def order(side: str, i: int) -> bytes:
    return json.dumps({"order_id": f"{side}{i}", "amount": 10.0 * i, "status": "PAID"}).encode()


def test_gray_rows_reach_only_the_gray_queues_of_the_next_topic_and_normal_rows_the_normal_ones(
        cluster, spark, tmp_path):
    cluster.add_broker("broker-a")
    cluster.add_broker("broker-b")
    cluster.create_topic(SOURCE, 4, 2)
    cluster.create_topic(TARGET, 6, 2)
    producer = SyncProducer("SINK_FLOW_PRODUCERS", cluster.ns_url)
    producer.start()
    try:
        for i in range(30):  # v2's orders
            producer.send(Message(SOURCE, order("g", i), gray=True))
        for i in range(40):  # v1's
            producer.send(Message(SOURCE, order("n", i), gray=False))
        producer.send(Message(SOURCE, b"not json", gray=True))
    finally:
        producer.stop()

    run_stage(spark, cluster.ns_url, True, str(tmp_path / "gray"))
    run_stage(spark, cluster.ns_url, False, str(tmp_path / "normal"))

    gray_rows = stored_rows(spark, cluster.ns_url, TARGET, gray=True)
    normal_rows = stored_rows(spark, cluster.ns_url, TARGET, gray=False)
    gray_ids = {json.loads(b)["order_id"] for b in bodies(gray_rows) if b != "not json"}
    assert gray_ids == {f"g{i}" for i in range(30)} and len(gray_rows) == 31, "every v2 row once, gray queues only"
    assert {json.loads(b)["order_id"] for b in bodies(normal_rows)} == {f"n{i}" for i in range(40)}
    assert len(normal_rows) == 40, "every v1 row once, in the normal queues only"
    assert all(r.gray and r.queue_id in (0, 5) for r in gray_rows), "stored as gray messages in gray queues"
    assert not any(r.gray for r in normal_rows)
    large = [json.loads(r.body) for r in normal_rows if json.loads(r.body)["band"] == "large"]
    assert sorted(o["order_id"] for o in large) == sorted(f"n{i}" for i in range(10, 40)), "enriched: band"
    assert all(r.tags == "PAID" and r.keys == [json.loads(r.body)["order_id"]] and "source_msg_id" in r.properties
               for r in normal_rows)
    assert [r.tags for r in gray_rows if bytes(r.body) == b"not json"] == ["INVALID"], "a bad body passes, tagged"
