"""A Spark job stopped or retired leaves the group's offsets at what it processed: the job taking its side over reads
on from there, repeating nothing (the lane chain's base retire on a loaded machine, where the last run could not
start, stored the base job's last batch twice)."""

from __future__ import annotations

import time

import pytest

from graymq.client.spark import StreamingJob
from graymq.client.sync import SyncProducer
from tests.spark.helpers import BatchLog, committed_and_max, poll_until, send

pytestmark = pytest.mark.spark
GROUP = "SPARK_HAND_OVER_GROUP"
TOPIC = "SPARK_HAND_OVER"


def test_a_stopped_job_commits_its_last_batch_and_its_successor_repeats_none_of_it(cluster, spark, tmp_path):
    cluster.add_broker("broker-a")
    cluster.create_topic(TOPIC, 4, 2)
    log = BatchLog(tmp_path / "out")
    options = {"nameserver": cluster.ns_url, "topic": TOPIC, "group": GROUP}

    def job(name: str, fail_available_now: bool = False) -> StreamingJob:
        made = StreamingJob(spark, options, lambda frame, _: frame.writeStream.foreachBatch(log.sink(name)),
                            str(tmp_path / name), trigger={"processingTime": "1 hour"}, heartbeat_interval_s=0.3)
        if fail_available_now:  # as when its Python worker does not connect back in time: no batch, no commit
            made._run_available_now = lambda deadline, lane: time.sleep(0.2) or False  # type: ignore[method-assign]
        return made

    producer = SyncProducer("SPARK_HAND_OVER_PRODUCERS", cluster.ns_url)
    producer.start()
    try:
        first = send(producer, TOPIC, 10, gray=False)
        old = job("old", fail_available_now=True)
        old.start()
        # the first trigger reads the ten; the next one (which would commit their end) is an hour away
        poll_until(lambda: old.query.lastProgress is not None and old.query.lastProgress["numInputRows"] == 10, 90,
                   "the old job's first batch")
        old.retire(timeout_s=1)
        committed, latest = committed_and_max(cluster.ns_url, GROUP, TOPIC)
        assert committed == latest, "the group's offsets are at what the retired job processed"

        second = send(producer, TOPIC, 6, gray=False)
        new = job("new")
        new.start()
        poll_until(lambda: len(log.msg_ids("new")) >= 6, 90, "the new job's first batch")
        new.stop()
    finally:
        producer.stop()
    assert sorted(log.msg_ids("old")) == sorted(first)
    assert sorted(log.msg_ids("new")) == sorted(second), "the new job reads on where the old one stopped"
    committed, latest = committed_and_max(cluster.ns_url, GROUP, TOPIC)
    assert committed == latest, "a plain stop commits the last batch too"
