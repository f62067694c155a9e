"""A streaming read restarted from its checkpoint neither skips nor repeats a committed batch."""

from __future__ import annotations

from collections import defaultdict

import pytest
from pyspark.errors import StreamingQueryException

from graymq.client.sync import SyncProducer
from tests.spark.helpers import BatchLog, committed_and_max, send

pytestmark = pytest.mark.spark
GROUP = "SPARK_RESTART_GROUP"
TOPIC = "SPARK_RESTART"


def run_available_now(spark, options, sink, checkpoint):
    query = (spark.readStream.format("graymq").options(**options).load()
             .writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(120), "availableNow run did not finish"
    finally:
        query.stop()


def test_restart_from_checkpoint_resumes_after_the_last_committed_batch(cluster, spark, tmp_path):
    cluster.add_broker("broker-a")
    cluster.create_topic(TOPIC, 4, 2)  # normal queues 1 and 2
    log = BatchLog(tmp_path / "out")
    checkpoint = str(tmp_path / "checkpoint")
    options = {"nameserver": cluster.ns_url, "topic": TOPIC, "group": GROUP, "maxRecordsPerTrigger": "5"}
    producer = SyncProducer("SPARK_RESTART_PRODUCERS", cluster.ns_url)
    producer.start()
    try:
        first = send(producer, TOPIC, 10, gray=False)
        # run 1: batch 0 is written, batch 1 fails in the sink after writing (not committed)
        with pytest.raises(StreamingQueryException, match="fails batch 1 once"):
            run_available_now(spark, options, log.sink("normal", fail_once_on=1), checkpoint)
        committed, _ = committed_and_max(cluster.ns_url, GROUP, TOPIC)
        assert sum(committed.values()) == 5, "the broker holds batch 0's end, not the failed batch's"
        second = send(producer, TOPIC, 4, gray=False)
        # run 2 from the same checkpoint: batch 1 again, then on to everything sent so far
        run_available_now(spark, options, log.sink("normal"), checkpoint)
    finally:
        producer.stop()

    calls = log.calls("normal")
    by_batch: dict[int, list[list[str]]] = defaultdict(list)
    for call in calls:
        by_batch[call["batch_id"]].append(sorted(row["msg_id"] for row in call["rows"]))
    assert len(by_batch[1]) == 2 and by_batch[1][0] == by_batch[1][1], "the uncommitted batch is replayed exactly"
    assert all(len(runs) == 1 for batch_id, runs in by_batch.items() if batch_id != 1), "committed batches never rerun"
    batches = [runs[0] for _, runs in sorted(by_batch.items())]
    delivered = [msg_id for batch in batches for msg_id in batch]
    assert len(delivered) == len(set(delivered)), "no message in two batches"
    assert sorted(delivered) == sorted(first + second), "no message skipped"
    assert all(len(batch) <= 5 for batch in batches), "maxRecordsPerTrigger bounds every batch"
    committed, latest = committed_and_max(cluster.ns_url, GROUP, TOPIC)
    assert committed == latest, "the last batch's end offsets are committed to the broker when the run returns"
