"""Each row stored once: a task killed mid-batch, the query restarted from its checkpoint, a batch write repeated."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql.functions import col, udf
from pyspark.sql.types import BinaryType

from graymq.client import Message
from graymq.client.sync import SyncProducer
from tests.spark.helpers import send
from tests.spark.sink_helpers import bodies, stored_rows

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]  # a killed worker, two runs: minutes on a busy machine
SOURCE, TARGET = "SINK_ONCE_A", "SINK_ONCE_B"


def dying_once(marker: Path, at: bytes):
    """A UDF that kills its Python worker at the row ``at``, on the first attempt only: after a pause, in which the
    rows before it reach the sink and are stored (on a busy machine the UDF can run far ahead of the sink)."""

    def enrich(body: bytes) -> bytes:
        if body == at and not marker.exists():
            marker.touch()
            time.sleep(5)
            os._exit(1)
        return body + b"+"

    return udf(enrich, BinaryType())


def run(spark, ns_url: str, enrich, checkpoint: str) -> None:
    frame = (spark.readStream.format("graymq").options(nameserver=ns_url, topic=SOURCE, group="SINK_ONCE").load()
             .select(enrich(col("body")).alias("body"), col("msg_id").alias("sharding_key")))
    query = (frame.writeStream.format("graymq").options(nameserver=ns_url, topic=TARGET, batchMaxMessages="5")
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(180), "availableNow run did not finish"
    finally:
        query.stop()


def test_a_task_killed_mid_batch_and_a_restart_from_the_checkpoint_store_each_row_once(cluster, spark, tmp_path):
    cluster.add_broker("broker-a")
    cluster.create_topic(SOURCE, 2, 0)
    cluster.create_topic(TARGET, 4, 0)
    producer = SyncProducer("SINK_ONCE_PRODUCERS", cluster.ns_url)
    producer.start()
    checkpoint = str(tmp_path / "checkpoint")
    enrich = dying_once(tmp_path / "killed", b"n250")
    try:
        send(producer, SOURCE, 400, gray=False)  # n0..n399, in the source's two queues
        with pytest.raises(StreamingQueryException):
            run(spark, cluster.ns_url, enrich, checkpoint)
        assert (tmp_path / "killed").exists()
        first = bodies(stored_rows(spark, cluster.ns_url, TARGET, gray=False))
        assert 0 < sum(first.values()) < 400, "the killed batch stored part of its rows"
        for i in range(400, 450):  # rows for a batch after the one run again
            producer.send(Message(SOURCE, f"n{i}".encode()))
        run(spark, cluster.ns_url, enrich, checkpoint)  # batch 0 again from the checkpoint, then batch 1
    finally:
        producer.stop()

    stored = bodies(stored_rows(spark, cluster.ns_url, TARGET, gray=False))
    expected = {f"n{i}+" for i in range(450)}
    assert set(stored) == expected, f"lost: {sorted(expected - set(stored))[:5]}"
    assert max(stored.values()) == 1, f"stored twice: {[b for b, n in stored.items() if n > 1][:5]}"
