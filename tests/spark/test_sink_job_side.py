"""A StreamingJob writing with the graymq sink is one producer of its producer group, on the job's side, and follows
that group's flag: set normal, its next rows go to the target's normal queues while what it wrote gray stays gray."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from graymq.client import Message, Producer
from graymq.client.spark import SinkOptions, StreamingJob
from graymq.client.sync import SyncProducer
from graymq.protocol.errors import ConfigError
from tests.spark.helpers import poll_until
from tests.spark.job_thread import running
from tests.spark.sink_helpers import bodies, stored_rows
from tests.support.cli import gray_status, graymq

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]
SOURCE, TARGET = "JOB_SIDE_IN", "JOB_SIDE_OUT"
GROUP, PRODUCER_GROUP = "JOB_SIDE_STAGE", "JOB_SIDE_WRITES"


def send(producer: Any, prefix: str, count: int) -> set[str]:
    """``count`` gray messages to the source; their bodies."""
    sent = {f"{prefix}{i}" for i in range(count)}
    for body in sorted(sent):
        producer.send(Message(SOURCE, body.encode(), gray=True))
    return sent


def producers(ns_url: str) -> list[dict[str, Any]]:
    """The clients of the producer group as ``graymq gray status PGROUP --json`` prints them."""
    return list(gray_status(ns_url, PRODUCER_GROUP)["clients"])


@pytest.fixture
def running_job(cluster, spark, tmp_path) -> Iterator[StreamingJob]:
    """A gray job (labels version=v2) reading SOURCE's gray queues and writing TARGET through the sink."""
    cluster.add_broker("broker-a")
    cluster.create_topic(SOURCE, 4, 2)
    cluster.create_topic(TARGET, 4, 2)
    options = {"nameserver": cluster.ns_url, "topic": SOURCE, "group": GROUP, "grayFlag": "true"}

    def pipeline(frame: Any, gray: bool) -> Any:
        return frame.select("body").writeStream.format("graymq").options(
            nameserver=cluster.ns_url, topic=TARGET, grayFlag=str(gray).lower())

    job = StreamingJob(spark, options, pipeline, str(tmp_path / "checkpoints"), trigger={"processingTime": "1 second"},
                       labels={"version": "v2"}, heartbeat_interval_s=0.3, poll_s=0.1, producer_group=PRODUCER_GROUP)
    with running(spark, job):
        yield job


def test_gray_job_is_one_gray_producer_of_its_group_and_writes_normal_once_the_group_flag_says_so(
        cluster, spark, running_job):
    producer = SyncProducer("JOB_SIDE_PRODUCERS", cluster.ns_url)
    producer.start()
    try:
        before = send(producer, "before-", 12)
        poll_until(lambda: set(bodies(stored_rows(spark, cluster.ns_url, TARGET, gray=True))) == before, 180,
                   "the gray job's rows in the target's gray queues", interval=0.5)
        [client] = producers(cluster.ns_url)
        job_id = running_job.client_id
        assert (client["client_id"], client["role"], client["gray"], client["state"]) == (job_id, "producer", True,
                                                                                         "GRAY")
        assert client["labels"]["version"] == "v2" and client["labels"]["app_name"] == spark.sparkContext.appName

        graymq(cluster.ns_url, "gray", "flag", PRODUCER_GROUP, job_id, "off", "--reason", "promote writes")
        poll_until(lambda: not producers(cluster.ns_url)[0]["gray"], 120, "the job's producer to report normal",
                   interval=0.5)
        after = send(producer, "after-", 9)  # still gray messages: the job still reads the gray queues
        poll_until(lambda: set(bodies(stored_rows(spark, cluster.ns_url, TARGET, gray=False))) == after, 180,
                   "the rows read after the flag in the target's normal queues", interval=0.5)
    finally:
        producer.stop()
    gray_rows = stored_rows(spark, cluster.ns_url, TARGET, gray=True)
    normal_rows = stored_rows(spark, cluster.ns_url, TARGET, gray=False)
    assert bodies(gray_rows) == {body: 1 for body in before}, "what it wrote gray stays in the gray queues, once"
    assert bodies(normal_rows) == {body: 1 for body in after}, "after the flag: normal queues only, once"
    assert all(r.gray for r in gray_rows) and not any(r.gray for r in normal_rows)
    [client] = producers(cluster.ns_url)  # the tasks never registered: still the job alone
    assert (client["client_id"], client["gray"], client["state"]) == (running_job.client_id, False, "NORMAL")
    [stage] = gray_status(cluster.ns_url, GROUP)["clients"]
    assert (stage["role"], stage["gray"]) == ("spark", True), "the consumer side follows its own group's flag"


def test_sink_tasks_register_unless_told_not_to():
    assert SinkOptions.parse({"nameserver": "http://ns:9876"}).register_producer
    assert not SinkOptions.parse({"nameserver": "http://ns:9876", "registerproducer": "false"}).register_producer
    with pytest.raises(ConfigError, match="registerProducer"):
        SinkOptions.parse({"nameserver": "http://ns:9876", "registerproducer": "maybe"})


def test_an_unregistered_producer_starts_without_a_name_server_and_keeps_its_flag():
    async def start_and_stop() -> tuple[bool, bool]:
        producer = Producer("NOBODY_HEARS", "http://127.0.0.1:9", gray=True, register=False)
        await producer.start()
        started = producer.started and not producer.membership.registered
        await producer.stop()
        return started, producer.gray

    assert asyncio.run(start_and_stop()) == (True, True)
