"""Flipping a gray Spark job to normal drains the gray queues first: nothing lost, backlog 0, then normal."""

from __future__ import annotations

import threading
import time

import pytest

from graymq.client.spark import StreamingJob
from graymq.client.spark.options import GRAY_FLAG_CONF
from graymq.client.sync import SyncProducer
from graymq.runbooks.group_state import GroupInspector
from tests.spark.helpers import BatchLog, poll_until, send

pytestmark = pytest.mark.spark
GROUP = "SPARK_DRAIN_GROUP"
TOPIC = "SPARK_DRAIN"


def controller_view(cluster) -> tuple[dict, int]:
    """The spark client and the gray backlog as ``graymq gray status`` sees them."""

    async def status(ns):
        inspector = GroupInspector(ns)
        try:
            return await inspector.status(GROUP)
        finally:
            await inspector.close()

    group = cluster.ns_call(status)
    spark_clients = [c.to_json() for c in group.clients if c.role == "spark"]
    assert len(spark_clients) == 1, group.clients
    return spark_clients[0], group.gray_backlog


def test_flip_to_normal_processes_every_gray_message_in_the_gray_run_before_reporting_normal(cluster, spark, tmp_path):
    cluster.add_broker("broker-a")
    cluster.create_topic(TOPIC, 6, 2)
    log = BatchLog(tmp_path / "out")
    options = {"nameserver": cluster.ns_url, "topic": TOPIC, "group": GROUP, "maxRecordsPerTrigger": "8"}
    producer = SyncProducer("SPARK_DRAIN_PRODUCERS", cluster.ns_url)
    producer.start()
    spark.conf.set(GRAY_FLAG_CONF, "true")  # the job's side comes from the Spark conf
    try:
        job = StreamingJob(spark, options, lambda frame, gray: frame.writeStream.foreachBatch(
            log.sink("gray" if gray else "normal")), str(tmp_path / "checkpoints"),
            trigger={"processingTime": "1 hour"}, labels={"version": "v2"}, heartbeat_interval_s=0.3, poll_s=0.1)
    finally:
        spark.conf.unset(GRAY_FLAG_CONF)
    stop = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            job.run(stop)
        except BaseException as exc:  # surfaced by the assertions below
            failure.append(exc)

    gray_ids = send(producer, TOPIC, 4, gray=True)
    runner = threading.Thread(target=run, name="spark-job")
    runner.start()
    try:
        # the gray run's first batch takes what was there; the next trigger is an hour away
        poll_until(lambda: len(log.msg_ids("gray")) == 4 or failure, 90, "the gray run's first batch")
        client, _ = controller_view(cluster)
        assert (client["gray"], client["state"], client["labels"]["version"]) == (True, "GRAY", "v2")
        assert client["labels"]["app_name"] == spark.sparkContext.appName
        gray_ids += send(producer, TOPIC, 13, gray=True)
        normal_ids = send(producer, TOPIC, 5, gray=False)  # one normal batch
        _, backlog = controller_view(cluster)
        assert backlog >= 13, "gray messages are waiting when the flag flips (two batches of the drain run)"

        cluster.ns_call(lambda ns: ns.set_flag(GROUP, client["client_id"], False, "promote v2"))
        normal_client = poll_until(lambda: (c := controller_view(cluster)[0]) and not c["gray"] and c, 120,
                                   "the job to report normal", interval=0.02)
        reported_at = time.time()
        gray_calls = log.calls("gray")
        assert not failure, failure
        assert sorted(log.msg_ids("gray")) == sorted(gray_ids), "every gray message processed once by the gray run"
        assert max(call["at"] for call in gray_calls) < reported_at
        assert normal_client["state"] == "NORMAL" and normal_client["desired_gray"] is False
        assert controller_view(cluster)[1] == 0, "the gray backlog on the brokers is 0 once it reports normal"

        poll_until(lambda: len(log.msg_ids("normal")) >= len(normal_ids) or failure, 90, "the normal run")
        assert sorted(log.msg_ids("normal")) == sorted(normal_ids), "the normal run reads the normal queues only"
        assert log.calls("gray") == gray_calls, "nothing more is read as gray"
    finally:
        stop.set()
        runner.join(60)
        producer.stop()
    assert not failure, failure
