"""The example job (jobs/): order events through graymq → per-minute figures in Parquet, rejects kept."""

from __future__ import annotations

import json

import pytest

from graymq.client import Message
from graymq.client.sync import SyncProducer
from jobs.order_stats import minute_totals, pipeline

pytestmark = pytest.mark.spark
TOPIC = "SPARK_ORDER_EVENTS"


def test_order_events_become_per_minute_figures_and_bad_bodies_are_kept(cluster, spark, tmp_path):
    cluster.add_broker("broker-a")
    cluster.create_topic(TOPIC, 4, 2)
    producer = SyncProducer("ORDER_PRODUCERS", cluster.ns_url)
    producer.start()
    try:
        amounts = [10.0, 2.5, 7.5, 30.0, 1.0, 4.0]
        for i, amount in enumerate(amounts):
            body = json.dumps({"order_id": f"o{i}", "amount": amount, "status": "PAID" if i % 3 else "REFUNDED"})
            producer.send(Message(TOPIC, body.encode()))
        bad = producer.send(Message(TOPIC, b"not json")).msg_id
    finally:
        producer.stop()
    output = str(tmp_path / "out")
    options = {"nameserver": cluster.ns_url, "topic": TOPIC, "group": "ORDER_STATS"}
    frame = spark.readStream.format("graymq").options(**options).load()
    query = (pipeline(output)(frame, False).option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(120)

    totals: dict[str, list[float]] = {}  # status -> [orders, amount, max] over the minutes (sends may straddle one)
    for row in minute_totals(spark, output).collect():
        orders, amount, largest = totals.get(row.status, [0, 0.0, 0.0])
        totals[row.status] = [orders + row.orders, amount + row.amount, max(largest, row.max_amount)]
    paid = [a for i, a in enumerate(amounts) if i % 3]
    refunded = [a for i, a in enumerate(amounts) if not i % 3]
    assert totals == {"PAID": [4, sum(paid), max(paid)], "REFUNDED": [2, sum(refunded), max(refunded)]}
    assert [r.msg_id for r in spark.read.parquet(f"{output}/rejected").collect()] == [bad]
