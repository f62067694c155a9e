"""Promote across a pipeline whose middle stage is a Spark StreamingJob, while its producers keep sending.

v1/v2 producers (producer group PIPE_IN, one send every 50 ms until the promote is over) → topic SPARK_PIPE_A →
group STAGE: a normal (v1) and a gray (v2) ``StreamingJob`` on Spark local[2], each writing SPARK_PIPE_B with the
graymq sink as one producer of STAGE_OUT (keys: the PIPE_A msg id) → group SINK (v1 and v2 ``graymq consume``
processes). A rule ``version=v2`` makes v2 gray in PIPE_IN, STAGE and SINK. Once gray messages reach SINK, v1's
job retires (two normal Spark jobs would both read every normal queue) and ``graymq gray promote STAGE
--producer-group PIPE_IN --producer-group STAGE_OUT --then SINK`` runs: its producer step turns the v2 job's
writes normal, then the job drains and flips, then SINK drains what the job wrote to SPARK_PIPE_B's gray queues.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from pyspark.sql import functions as F

from graymq.client import Message
from graymq.client.spark import StreamingJob
from graymq.client.sync import SyncProducer
from graymq.devkit.processes import GraymqProcess
from tests.spark.conftest import spark  # noqa: F401 - the shared local[2] session
from tests.spark.job_thread import running
from tests.support.cli import graymq, json_lines, start_consumer, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.timeout(600)]
TOPIC_A, TOPIC_B = "SPARK_PIPE_A", "SPARK_PIPE_B"
SOURCE, STAGE, STAGE_OUT, SINK = "PIPE_IN", "STAGE", "STAGE_OUT", "SINK"
SEND_INTERVAL_S = 0.05


def stage_job(spark, ns: str, version: str, root: str) -> StreamingJob:  # noqa: F811 - the fixture
    """A STAGE job (label version=``version``, gray for v2) passing each message's body on, keyed by its msg id."""

    def pipeline(frame: Any, gray: bool) -> Any:
        return frame.select("body", F.array("msg_id").alias("keys")).writeStream.format("graymq").options(
            nameserver=ns, topic=TOPIC_B, grayFlag=str(gray).lower())

    options = {"nameserver": ns, "topic": TOPIC_A, "group": STAGE, "grayFlag": str(version == "v2").lower()}
    return StreamingJob(spark, options, pipeline, f"{root}/{version}", trigger={"processingTime": "1 second"},
                        labels={"version": version}, heartbeat_interval_s=0.5, poll_s=0.2, producer_group=STAGE_OUT)


@pytest.fixture
def gray_job(cluster, spark, tmp_path) -> Iterator[StreamingJob]:  # noqa: F811 - the fixture
    """The topics, the v2 rules and the v2 job running (``run``) on a thread of its own."""
    cluster.add_broker("broker-a")
    for topic in (TOPIC_A, TOPIC_B):
        cluster.create_topic(topic, 4, 2)
    for group in (SOURCE, STAGE, SINK):
        cluster.ns_call(lambda ns, g=group: ns.add_rule(g, {"version": "v2"}, True))
    job = stage_job(spark, cluster.ns_url, "v2", str(tmp_path))
    with running(spark, job):
        yield job


class Source:
    """A producer of PIPE_IN (label version=``version``) sending to PIPE_A on a thread until ``stop``."""

    def __init__(self, ns: str, version: str, stop: threading.Event) -> None:
        self.producer = SyncProducer(SOURCE, ns, client_id=f"source-{version}", labels={"version": version},
                                     heartbeat_interval_s=0.5)
        self.sent: dict[str, bool] = {}  # msg id -> stored gray
        self.stop = stop
        self.thread = threading.Thread(target=self._run, name=f"source-{version}")

    def _run(self) -> None:
        self.producer.start()
        try:
            while not self.stop.wait(SEND_INTERVAL_S):
                result = self.producer.send(Message(TOPIC_A, f"body-{len(self.sent)}".encode()))
                self.sent[result.msg_id] = result.gray
        finally:
            self.producer.stop()


def at_sink(sinks: list[GraymqProcess]) -> list[dict[str, Any]]:
    return [m for p in sinks for m in json_lines(p)]


def test_promote_across_a_spark_stage_under_load_loses_and_doubles_nothing(
        cluster, spark, gray_job, graymq_process, tmp_path):  # noqa: F811 - the fixture
    ns = cluster.ns_url
    sinks = [start_consumer(graymq_process, ns, SINK, f"sink-{v}", TOPIC_B, "*", "--label", f"version={v}")
             for v in ("v1", "v2")]
    normal_job = stage_job(spark, ns, "v1", str(tmp_path))
    normal_job.start()
    stop = threading.Event()
    sources = [Source(ns, "v1", stop), Source(ns, "v2", stop)]
    try:
        for source in sources:
            source.thread.start()
        wait_for(lambda: sum(m["gray"] for m in at_sink(sinks)) > 20, 180, "gray messages through the Spark stage")
        normal_job.retire()
        sent_before = sum(len(source.sent) for source in sources)
        started = time.monotonic()
        result = graymq(ns, "gray", "promote", STAGE, "--producer-group", SOURCE, "--producer-group", STAGE_OUT,
                        "--then", SINK, "--timeout", "180", "--json", timeout=240)
        promote_s = time.monotonic() - started
    finally:
        stop.set()
        for source in sources:
            source.thread.join(30)
        normal_job.stop()  # nothing left to do once retired
    report = json.loads(result.stdout)
    sent = {msg_id: gray for source in sources for msg_id, gray in source.sent.items()}
    wait_for(lambda: set(sent) <= {k for m in at_sink(sinks) for k in m["keys"]}, 120, "every message at SINK")
    gray_left = {g: [c.client_id for c in cluster.ns_call(lambda c, g=g: c.group_clients(g)).clients if c.gray]
                 for g in (SOURCE, STAGE, STAGE_OUT, SINK)}
    for p in sinks:
        assert p.terminate() == 0, p.output[-2000:]

    assert report["state"] == "SUCCEEDED" and report["groups_done"] == [STAGE, SINK], report
    first = report["stages"][0]
    assert f"{STAGE_OUT}/{gray_job.client_id}" in first["producers_flipped"], "the job is a producer of STAGE_OUT"
    assert first["consumers_flipped"] == [gray_job.client_id]
    assert sent_before < len(sent) and any(sent.values()), "the producers sent, gray too, during the promote"
    consumed = at_sink(sinks)
    keys = Counter(k for m in consumed for k in m["keys"])
    lost, doubled = set(sent) - set(keys), {k: n for k, n in keys.items() if n > 1}
    assert not lost and not doubled, f"{len(lost)} lost, {len(doubled)} consumed twice at SINK"
    assert any(m["gray"] for m in consumed)
    assert all(m["client_id"] == "sink-v2" for m in consumed if m["gray"]), "a gray message reached v1 at SINK"
    assert all(sent[m["keys"][0]] for m in consumed if m["gray"]), "only v2's messages flowed gray"
    assert not any(gray_left.values()), gray_left
    print(f"spark stage promote: sent {len(sent)} ({sum(sent.values())} gray, "
          f"{len(sent) - sent_before} during the promote), {sum(m['gray'] for m in consumed)} gray at SINK, "
          f"promote {promote_s:.1f}s, stage timings {[s['timings_s'] for s in report['stages']]}")
