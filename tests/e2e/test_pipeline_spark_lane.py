"""Lane v3 flows through a Spark stage and is promoted end to end while lane v2 and base flow on (docs/lanes.md).

Producers of PIPE_IN, one base, one in v2, one in v3 (a send every 50 ms each until the promote is over) → topic
SPARK_LANE_A → group STAGE: a base and a v3 ``StreamingJob`` (option ``lane``) on Spark local[2], each writing
SPARK_LANE_B with the graymq sink as one producer of STAGE_OUT (keys: the A msg id, then the job's name), and a
``graymq consume --lane v2`` process taking v2's messages (they end there) → group SINK: a base and a v3 ``graymq
consume``. Once v3 messages reach SINK, the base job retires (two base Spark jobs would both read every base
queue) and ``graymq gray promote STAGE --lane v3 --producer-group PIPE_IN --producer-group STAGE_OUT --then SINK``
runs: v3's producers turn base, the v3 job drains v3's slot of A and becomes the base job, then SINK's v3 consumer
drains what the job wrote to v3's slot of B. Checked: nothing lost or doubled, no v3 message read by a non-v3
consumer or job (A's v3 slot is read by the v3 job only; B's by SINK's v3 consumer only), v2 untouched.
"""

from __future__ import annotations

import itertools
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
TOPIC_A, TOPIC_B = "SPARK_LANE_A", "SPARK_LANE_B"
SOURCE, STAGE, STAGE_OUT, SINK = "PIPE_IN", "STAGE", "STAGE_OUT", "SINK"
SEND_INTERVAL_S = 0.05


def stage_job(spark, ns: str, lane: str | None, root: str) -> StreamingJob:  # noqa: F811 - the fixture
    """A STAGE job in ``lane`` (None: base) passing each body on, keyed by its msg id and the job's name."""
    name = f"stage-{lane or 'base'}"

    def pipeline(frame: Any, side: Any) -> Any:  # the job sets the sink's side (it has a producer group)
        keys = F.array("msg_id", F.lit(name)).alias("keys")
        return frame.select("body", keys).writeStream.format("graymq").options(nameserver=ns, topic=TOPIC_B)

    options = {"nameserver": ns, "topic": TOPIC_A, "group": STAGE, **({"lane": lane} if lane else {})}
    # a stop waits at most 10 s for the running micro-batch (on a loaded machine one may take longer): a batch
    # stopped mid-way runs again from the checkpoint, and the sink stores its rows once
    return StreamingJob(spark, options, pipeline, f"{root}/{name}", trigger={"processingTime": "1 second"},
                        labels={"job": name}, heartbeat_interval_s=0.5, poll_s=0.2, stop_grace_s=10.0,
                        producer_group=STAGE_OUT)


@pytest.fixture
def v3_job(cluster, spark, tmp_path) -> Iterator[StreamingJob]:  # noqa: F811 - the fixture
    """Topics with room for two lanes (v2, v3), and the v3 job running (``run``) on a thread of its own."""
    cluster.add_broker("broker-a")
    for topic in (TOPIC_A, TOPIC_B):
        cluster.create_topic(topic, 4, 2, lanes=2)
    job = stage_job(spark, cluster.ns_url, "v3", str(tmp_path))
    with running(spark, job):
        yield job


class Source:
    """A producer of PIPE_IN in ``lane`` (None: base) sending to A on a thread until ``stop``."""

    def __init__(self, ns: str, lane: str | None, stop: threading.Event) -> None:
        self.producer = SyncProducer(SOURCE, ns, client_id=f"source-{lane or 'base'}", lane=lane,
                                     heartbeat_interval_s=0.5)
        self.sent: dict[str, str | None] = {}  # msg id -> the lane it was stored in (None: base)
        self.stop = stop
        self.thread = threading.Thread(target=self._run, name=f"source-{lane}")

    def _run(self) -> None:
        self.producer.start()
        try:
            while not self.stop.wait(SEND_INTERVAL_S):
                result = self.producer.send(Message(TOPIC_A, f"body-{len(self.sent)}".encode()))
                self.sent[result.msg_id] = result.lane if result.gray else None
        finally:
            self.producer.stop()


def at(processes: list[GraymqProcess]) -> list[dict[str, Any]]:
    return [m for p in processes for m in json_lines(p)]


def test_lane_v3_through_a_spark_stage_is_promoted_end_to_end_while_v2_and_base_flow(
        cluster, spark, v3_job, graymq_process, tmp_path):  # noqa: F811 - the fixture
    ns = cluster.ns_url
    sinks = [start_consumer(graymq_process, ns, SINK, "sink-base", TOPIC_B),
             start_consumer(graymq_process, ns, SINK, "sink-v3", TOPIC_B, "*", "--lane", "v3")]
    v2_stage = start_consumer(graymq_process, ns, STAGE, "stage-v2", TOPIC_A, "*", "--lane", "v2")
    base_job = stage_job(spark, ns, None, str(tmp_path))
    base_job.start()
    stop = threading.Event()
    sources = [Source(ns, lane, stop) for lane in (None, "v2", "v3")]
    phases = [time.monotonic()]  # flowing through, retired, promoted, all at SINK
    try:
        for source in sources:
            source.thread.start()
        wait_for(lambda: sum(m["gray"] for m in at(sinks)) > 10 and len(at(sinks)) > 30, 120,
                 "v3 and base messages through the Spark stage")
        phases.append(time.monotonic())
        base_job.retire()
        phases.append(time.monotonic())
        result = graymq(ns, "gray", "promote", STAGE, "--lane", "v3", "--producer-group", SOURCE, "--producer-group",
                        STAGE_OUT, "--then", SINK, "--timeout", "120", "--json", timeout=180)
        phases.append(time.monotonic())
    finally:
        stop.set()
        for source in sources:
            source.thread.join(30)
        base_job.stop()  # nothing left to do once retired
    report = json.loads(result.stdout)
    sent = {msg_id: lane for source in sources for msg_id, lane in source.sent.items()}
    through = {msg_id for msg_id, lane in sent.items() if lane != "v2"}
    v2_sent = set(sent) - through
    wait_for(lambda: through <= {m["keys"][0] for m in at(sinks)} and v2_sent <= {m["msg_id"] for m in
                                                                                  json_lines(v2_stage)},
             120, "every message at SINK (v2's at STAGE)")
    phases.append(time.monotonic())
    in_v3 = {g: [c.client_id for c in cluster.ns_call(lambda c, g=g: c.group_clients(g)).clients if c.in_lane == "v3"]
             for g in (SOURCE, STAGE, STAGE_OUT, SINK)}
    for p in [*sinks, v2_stage]:
        assert p.terminate() == 0, p.output[-2000:]

    assert report["state"] == "SUCCEEDED" and report["groups_done"] == [STAGE, SINK], report
    assert report["lane"] == "v3", report
    assert report["stages"][0]["consumers_flipped"] == [v3_job.client_id]
    assert f"{STAGE_OUT}/{v3_job.client_id}" in report["stages"][0]["producers_flipped"]
    consumed = at(sinks)
    keys = Counter(m["keys"][0] for m in consumed)
    lost, doubled = through - set(keys), {k: n for k, n in keys.items() if n > 1}
    v2_keys = Counter(m["msg_id"] for m in json_lines(v2_stage))
    print(f"spark lane stage: sent {len(sent)} ({sum(lane == 'v3' for lane in sent.values())} in v3, "
          f"{len(v2_sent)} in v2), lost {len(lost)}, doubled {len(doubled)} at SINK; v2 at STAGE: "
          f"{len(v2_sent - set(v2_keys))} lost, {sum(n > 1 for n in v2_keys.values())} doubled; "
          f"{sum(m['gray'] for m in consumed)} v3 at SINK; stage timings {[s['timings_s'] for s in report['stages']]}; "
          f"seconds to flow, retire, promote, catch up: {[round(b - a, 1) for a, b in itertools.pairwise(phases)]}")
    assert not lost and not doubled, f"{len(lost)} lost, {len(doubled)} consumed twice at SINK"
    assert set(v2_keys) == v2_sent and max(v2_keys.values()) == 1, "v2 consumed once each at STAGE"
    assert not set(keys) & v2_sent, "a v2 message left STAGE through a Spark job"
    assert any(lane == "v3" for lane in sent.values()) and any(m["gray"] for m in consumed)
    assert all(m["keys"][1] == "stage-v3" for m in consumed if sent[m["keys"][0]] == "v3"), \
        "a message of A's v3 slot was read by the base job"
    assert all(m["client_id"] == "sink-v3" for m in consumed if m["gray"]), "a v3 message reached SINK's base side"
    assert not any(in_v3.values()), in_v3
