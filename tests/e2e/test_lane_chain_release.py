"""A release across three services, lane by lane (issue 43, docs/lanes.md): base, lane v2 and lane v3 at every hop.

graymq producers of CHAIN_A (service A: base, v2, v3; a send every 100 ms each until the end) → CHAIN_T1 → group
CHAIN_B: three stock Python SDK relays (service B, processes of their own under pod host names ``relay-v1-*``,
``relay-v2-*``, ``relay-v3-*``; host rules of CHAIN_B put the last two in v2 and v3; their producers, group CHAIN_T2,
stay base) sending each message on to CHAIN_T2 with the ``graymq.lane`` property the broker delivered it with and the
trace context of their own span → group CHAIN_C: three Spark ``StreamingJob``s on local[2] (stage C: base, option
``lane`` v2 and v3) writing CHAIN_T3 (producer group CHAIN_C_OUT) → group CHAIN_D: three graymq push consumers
(service D: base, ``lane`` v2 and v3), in this process. Once every lane flows end to end: the base Spark job retires,
``graymq gray promote CHAIN_B --lane v3 ... --then CHAIN_C ... --then CHAIN_D``; then the v3 job (base now) retires
and the same for v2. Checked: nothing lost or doubled at D, no message stored in a lane's queues of a hop consumed
there outside the lane, and each message's spans (A's send, B's relay, C's send in a Spark worker, D's process) one
trace, each the child of the hop before and naming the lane of its hop (``graymq.lane``); C's workers trace into a
file (``tests/support/spans.py``, ``worker_spans``).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from pyspark.sql import functions as F

from graymq.client import Message
from graymq.client.spark import StreamingJob
from graymq.client.sync import SyncProducer, SyncPushConsumer
from graymq.core.queue_layout import slot_queue_ids
from graymq.nameserver_api.client import NameServerClient
from graymq.protocol.errors import GrayMQError
from tests.spark.conftest import spark  # noqa: F401 - the shared local[2] session
from tests.support.cli import graymq, wait_for
from tests.support.cluster import Cluster
from tests.support.spans import spans, worker_spans  # noqa: F401 - the fixtures
from tests.support.stock_sdk import StockRelay

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.timeout(600)]
T1, T2, T3 = "CHAIN_T1", "CHAIN_T2", "CHAIN_T3"
SOURCE, RELAY, STAGE, STAGE_OUT, SINK = "CHAIN_A", "CHAIN_B", "CHAIN_C", "CHAIN_C_OUT", "CHAIN_D"
QUEUES, GRAY, SLOTS = 4, 2, 2
LANES: tuple[str | None, ...] = (None, "v2", "v3")
SEND_INTERVAL_S = 0.1


def name(lane: str | None) -> str:
    return lane or "base"


def lanes_everywhere(cluster: Cluster) -> str:
    """The broker with its gRPC endpoint, the topics (room for two lanes), every group's switch on, and CHAIN_B's
    host rules; the endpoint's address."""
    cluster.add_broker("broker-a", "--grpc-port", "0")
    for topic in (T1, T2, T3):
        cluster.create_topic(topic, QUEUES, GRAY, lanes=SLOTS)

    async def switches(ns: NameServerClient) -> None:
        for group in (SOURCE, RELAY, T2, STAGE, STAGE_OUT, SINK):
            await ns.set_switch(group, True)

    cluster.ns_call(switches)
    for lane in ("v2", "v3"):
        graymq(cluster.ns_url, "gray", "rule", RELAY, "--label", f"host=relay-{lane}-*", "--lane", lane, "on")
    info = cluster.brokers["broker-a"].ready_info
    assert info is not None
    return str(info["grpc"])


class Source:
    """A producer of CHAIN_A in ``lane`` sending to T1 on a thread until ``stop``."""

    def __init__(self, ns: str, lane: str | None, stop: threading.Event) -> None:
        self.producer = SyncProducer(SOURCE, ns, client_id=f"a-{name(lane)}", lane=lane, heartbeat_interval_s=0.5)
        self.sent: dict[str, str | None] = {}  # msg id -> the lane it was stored in (None: base)
        self.where: dict[str, tuple[int, float]] = {}  # msg id -> its T1 queue id, when it was stored
        self.unknown = 0  # sends that failed (timed out on a loaded machine): stored or not, nobody knows
        self.stop = stop
        self.thread = threading.Thread(target=self._run, name=f"a-{name(lane)}")

    def _run(self) -> None:
        self.producer.start()
        try:
            while not self.stop.wait(SEND_INTERVAL_S):
                try:
                    result = self.producer.send(Message(T1, f"body-{len(self.sent)}".encode()))
                except GrayMQError:
                    self.unknown += 1  # the checker allows as many deliveries of messages it never heard of
                    continue
                self.sent[result.msg_id] = result.lane if result.gray else None
                self.where[result.msg_id] = (result.queue.queue_id, time.time())
        finally:
            self.producer.stop()


def stage_job(spark, ns: str, lane: str | None, root: Path) -> StreamingJob:  # noqa: F811 - the fixture
    """A CHAIN_C job in ``lane``: each message on to T3 with its key (A's msg id, as B relayed it), the job's name
    and its T2 queue appended, and its trace context."""
    job = f"stage-{name(lane)}"

    def pipeline(frame: Any, side: Any) -> Any:
        keys = F.concat("keys", F.array(F.lit(job), F.col("queue_id").cast("string"))).alias("keys")
        context = F.map_filter("properties", lambda k, v: k.isin("traceparent", "tracestate")).alias("properties")
        return frame.select("body", keys, context).writeStream.format("graymq").options(nameserver=ns, topic=T3)

    options = {"nameserver": ns, "topic": T2, "group": STAGE, **({"lane": lane} if lane else {})}
    return StreamingJob(spark, options, pipeline, str(root / job), trigger={"processingTime": "1 second"},
                        labels={"job": job}, heartbeat_interval_s=0.5, poll_s=0.2, stop_grace_s=30.0,
                        producer_group=STAGE_OUT)


class JobThread:
    """A job following its lane on a thread of its own; ``end(retire=...)`` stops or retires it there."""

    def __init__(self, spark, job: StreamingJob) -> None:  # noqa: F811 - the fixture
        self.spark, self.job = spark, job
        self.stop, self.retiring = threading.Event(), False
        self.failure: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, name=job.labels.get("job", "job"))
        self.thread.start()

    def _run(self) -> None:
        self.spark._jvm.SparkSession.setActiveSession(self.spark._jsparkSession)
        try:
            StreamingJob._retrying_drain(self.job.start)
            while not self.stop.wait(self.job.poll_s):
                StreamingJob._retrying_drain(self.job.poll)
            if self.retiring:
                self.job.retire()
            else:
                self.job.stop()
        except BaseException as exc:  # raised by end()
            self.failure.append(exc)
            self.job.stop()

    def end(self, retire: bool = False) -> None:
        self.retiring = retire
        self.stop.set()
        self.thread.join(180)
        assert not self.thread.is_alive() and not self.failure, self.failure


class Sink:
    """CHAIN_D's push consumer in ``lane``: every delivery as (A's msg id, keys, T3 queue id, D's msg id)."""

    def __init__(self, ns: str, lane: str | None) -> None:
        self.lane = lane
        self.delivered: list[tuple[str, list[str], int, str]] = []

        async def listener(messages: list[Any]) -> None:
            self.delivered.extend((m.keys[0], list(m.keys), m.queue_id, m.msg_id) for m in messages)

        self.consumer = SyncPushConsumer(SINK, ns, client_id=f"d-{name(lane)}", listener=listener, lane=lane,
                                         consume_from="first", nameserver_interval_s=0.5, drain_poll_s=0.05)
        self.consumer.subscribe(T3, "*")
        self.consumer.start()


def queue_lanes(cluster: Cluster, topic: str) -> dict[int, str]:
    """queue id -> the lane holding its slot, as the topic's route says now."""
    route = cluster.ns_call(lambda ns: ns.get_route(topic))
    total = QUEUES + (SLOTS - 1) * GRAY
    return {q: lane for lane, slot in route.lanes or () for q in slot_queue_ids(total, GRAY, SLOTS, slot)}


def promote(ns: str, lane: str) -> dict[str, Any]:
    """The pipeline promote of ``lane``, upstream first: B (A's and B's producers), C (C's), D."""
    result = graymq(ns, "gray", "promote", RELAY, "--lane", lane, "--producer-group", SOURCE, "--producer-group", T2,
                    "--then", STAGE, "--producer-group", STAGE_OUT, "--then", SINK, "--timeout", "120", "--json",
                    timeout=200, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return dict(json.loads(result.stdout))


@pytest.fixture
def relays(cluster: Cluster, tmp_path: Path) -> Iterator[dict[str | None, StockRelay]]:
    endpoint = lanes_everywhere(cluster)
    started: dict[str | None, StockRelay] = {}
    try:
        for lane in LANES:
            host = f"relay-{'v1' if lane is None else lane}-5d8f2"
            started[lane] = StockRelay(endpoint, RELAY, T1, T2, f"relay-{name(lane)}", tmp_path / f"relay-{name(lane)}",
                                       host=host)
            assert "client_id" in started[lane].started, started[lane].started
        yield started
    finally:
        for relay in started.values():
            relay.close()


def job_lane(job: str) -> str | None:
    """The lane a stage job was started in, from its name."""
    lane = job.removeprefix("stage-")
    return None if lane == "base" else lane


def out_of_lane(deliveries: Sequence[tuple[str | None, str | None]]) -> int:
    """Deliveries (lane of the queue, lane of the consumer as started) of a lane's message outside that lane."""
    return sum(stored is not None and stored != consumer for stored, consumer in deliveries)


def test_a_release_across_a_stock_relay_a_spark_stage_and_graymq_consumers_is_promoted_lane_by_lane(
        cluster, spark, relays, spans, worker_spans, tmp_path):  # noqa: F811 - the fixtures
    ns = cluster.ns_url
    sinks = {lane: Sink(ns, lane) for lane in LANES}
    base_job = stage_job(spark, ns, None, tmp_path)
    base_job.start()
    lane_jobs = {lane: JobThread(spark, stage_job(spark, ns, lane, tmp_path)) for lane in ("v2", "v3")}
    stop = threading.Event()
    sources = [Source(ns, lane, stop) for lane in LANES]
    phases, reports = [time.monotonic()], []
    try:
        for source in sources:
            source.thread.start()
        wait_for(lambda: all(len(s.delivered) >= 5 for s in sinks.values()), 150, "every lane through to D")
        lanes_of = {topic: queue_lanes(cluster, topic) for topic in (T1, T2, T3)}  # before a promote frees a slot
        phases.append(time.monotonic())
        base_job.retire()
        reports.append(promote(ns, "v3"))
        phases.append(time.monotonic())
        lane_jobs["v3"].end(retire=True)  # base now, as the v2 job will be
        reports.append(promote(ns, "v2"))
        phases.append(time.monotonic())
        stop.set()
        for source in sources:
            source.thread.join(30)
        sent = {msg_id: lane for source in sources for msg_id, lane in source.sent.items()}
        deadline = time.monotonic() + 120
        while not set(sent) <= {d[0] for s in sinks.values() for d in s.delivered} and time.monotonic() < deadline:
            time.sleep(0.2)
        phases.append(time.monotonic())
    finally:
        stop.set()
        for source in sources:
            source.thread.join(30)
        base_job.stop()
        for thread in lane_jobs.values():
            if thread.thread.is_alive():
                thread.end()
    for sink in sinks.values():
        sink.consumer.stop()
    for relay in relays.values():
        relay.close()
    where = {msg_id: at for source in sources for msg_id, at in source.where.items()}
    check_chain(sent, sum(source.unknown for source in sources), relays, sinks, lanes_of,
                (spans.get_finished_spans(), worker_spans()), reports, phases, where)


def check_chain(sent: dict[str, str | None], unknown: int, relays: dict[str | None, StockRelay],
                sinks: dict[str | None, Sink], lanes_of: dict[str, dict[int, str]],
                finished: tuple[tuple[ReadableSpan, ...], list[dict[str, Any]]], reports: list[dict[str, Any]],
                phases: list[float], where: dict[str, tuple[int, float]]) -> None:
    """``finished``: the spans of this process and those of the Spark workers (as JSON); ``where``: A's msg id -> its
    T1 queue and the time it was stored (to tell where a message the checks fail on went)."""
    everything = [(lane, line) for lane, relay in relays.items() for line in relay.lines]
    errors = [line for _, line in everything if "error" in line]
    unheard = {line["relayed"] for _, line in everything if "relayed" in line} - set(sent)
    assert len(unheard) <= unknown, f"B relayed {len(unheard)} messages A never sent ({unknown} sends failed)"
    relayed = [(lane, line) for lane, line in everything if line.get("relayed") not in unheard]
    at_b = [(sent[line["relayed"]], lane) for lane, line in relayed if "relayed" in line]
    at_d = [(lane, d) for lane, sink in sinks.items() for d in sink.delivered]
    at_c = [(lanes_of[T2].get(int(d[1][2])), job_lane(d[1][1])) for _, d in at_d]
    at_d_lanes = [(lanes_of[T3].get(d[2]), lane) for lane, d in at_d]
    counts = Counter(d[0] for _, d in at_d)
    lost, doubled = set(sent) - set(counts), {k for k, n in counts.items() if n > 1}
    not_relayed = set(sent) - {line["relayed"] for _, line in relayed if "relayed" in line}
    print(f"lane chain: sent {dict(Counter(name(lane) for lane in sent.values()))} ({unknown} failed), lost "
          f"{len(lost)} (of which "
          f"{len(not_relayed)} not relayed by B; lanes {dict(Counter(name(sent[k]) for k in lost))}), doubled "
          f"{len(doubled)} at D; out-of-lane deliveries at B {out_of_lane(at_b)}, C {out_of_lane(at_c)}, D "
          f"{out_of_lane(at_d_lanes)}; in a lane's queues at B {sum(s is not None for s, _ in at_b)}, C "
          f"{sum(s is not None for s, _ in at_c)}, D {sum(s is not None for s, _ in at_d_lanes)}; relay errors "
          f"{len(errors)}; seconds to flow, promote v3, promote v2, "
          f"catch up: {[round(b - a, 1) for a, b in itertools.pairwise(phases)]}")
    assert all(r["state"] == "SUCCEEDED" and r["groups_done"] == [RELAY, STAGE, SINK] for r in reports), reports
    assert not lost and not doubled, (
        f"{len(lost)} lost, {len(doubled)} doubled at D; {where_doubled(doubled, relayed, at_d)}")
    assert not errors, errors[:5]
    assert not out_of_lane(at_b) and not out_of_lane(at_c) and not out_of_lane(at_d_lanes)
    for hop in (at_b, at_c, at_d_lanes):  # each lane really flowed through each hop in its own queues
        assert {"v2", "v3"} <= {stored for stored, _ in hop}
    wall = time.time() - time.monotonic()
    context = {"where": where, "phases": [round(p + wall, 3) for p in phases], "T1 lanes": lanes_of[T1]}
    traces = trace_check(sent, relayed, [d for d in at_d if d[1][0] in sent], lanes_of[T3], finished, context)
    print(f"lane chain: spans per trace {dict(Counter(traces.values()))}")
    assert set(traces) == set(sent) and set(traces.values()) == {4}, Counter(traces.values())


def where_doubled(doubled: set[str], relayed: list[tuple[str | None, dict[str, Any]]],
                  at_d: list[tuple[str | None, tuple[str, list[str], int, str]]]) -> str:
    """Which hop doubled each message D got twice: B relayed it twice, C wrote it twice (D got two messages), or D
    had one message twice; with the first few deliveries (D's lane, C's job and T2 queue, T3 queue, D's msg id)."""
    relays = Counter(line["relayed"] for _, line in relayed if line.get("relayed") in doubled)
    deliveries = {k: [(name(lane), *d[1][1:3], d[2], d[3]) for lane, d in at_d if d[0] == k] for k in sorted(doubled)}
    hops = Counter("B" if relays[k] > 1 else "C" if len({d[-1] for d in ds}) > 1 else "D"
                   for k, ds in deliveries.items())
    return f"by hop {dict(hops)}; first {dict(itertools.islice(deliveries.items(), 3))}"


def trace_check(sent: dict[str, str | None], relayed: list[tuple[str | None, dict[str, Any]]],
                at_d: list[tuple[str | None, tuple[str, list[str], int, str]]], t3_lanes: dict[int, str],
                finished: tuple[tuple[ReadableSpan, ...], list[dict[str, Any]]], context: dict[str, Any]
                ) -> dict[str, int]:
    """A's msg id -> the hops of its trace with spans (A's send, B's relay, C's send, D's process), each checked: one
    trace, each the child of the hop before, ``graymq.lane`` the lane of its hop's queue (absent for base)."""
    here, in_workers = finished
    by_id = {(s.attributes or {}).get("messaging.message.id"): s for s in here if s.name.startswith("send ")}
    processed = {(s.attributes or {}).get("messaging.message.id"): s for s in here if s.name.startswith("process ")}
    stage_sends = {s["context"]["span_id"][2:]: s for s in in_workers if s["name"] == f"send {T3}"}
    relay_of = {line["relayed"]: line for _, line in relayed if "relayed" in line}
    in_trace = Counter(s.context.trace_id for s in here if s.context is not None)  # spans of this process per trace
    counted: dict[str, int] = {}
    for _, (origin, _, queue_id, d_msg_id) in at_d:
        send, relay, process = by_id[origin], relay_of[origin], processed[d_msg_id]
        assert send.context is not None and process.parent is not None
        stage = stage_sends[f"{process.parent.span_id:016x}"]  # D's message came from C's send span
        trace_id = f"{send.context.trace_id:032x}"
        assert trace_id == relay["trace_id"] == stage["context"]["trace_id"][2:] == f"{process.context.trace_id:032x}"
        assert relay["parent_id"] == f"{send.context.span_id:016x}" and stage["parent_id"][2:] == relay["span_id"]
        queue, stored_at = context["where"].get(origin, (None, None))
        assert (send.attributes or {}).get("graymq.lane") == sent[origin] == relay["lane"], (
            f"{origin}: stored in lane {sent[origin]} (T1 queue {queue} at {stored_at}), relayed by {relay['relay']} "
            f"in lane {relay['lane']} (attempt {relay['attempt']} at {relay['at']}); phases {context['phases']}, "
            f"T1's slots {context['T1 lanes']}")
        assert stage["attributes"].get("graymq.lane") == (process.attributes or {}).get("graymq.lane") == \
            t3_lanes.get(queue_id)
        counted[origin] = in_trace[send.context.trace_id] + 2  # B's relay span, in its own process; C's, in a worker
    return counted
