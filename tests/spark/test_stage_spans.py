"""A Spark stage's own spans (``client/spark/spans.py``): a graymq producer in lane v3 sends to STAGE_IN with
tracing on; the stage reads v3's queues and writes each body with its ``properties`` to STAGE_OUT in v3. The source
has a ``receive`` span per pull linked to the messages it returned, the sink a ``send`` span per row, the child of
the producer's send span of the row's message, and STAGE_OUT's message carries that span's context on: producer →
stage → next consumer is one trace, ``graymq.lane`` v3 on each span. First with the tasks' code in this process (no
JVM), then through Spark local[2] with the workers tracing into a file."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql.types import BinaryType, MapType, StringType, StructField, StructType

from graymq.client import Message
from graymq.client.message import MessageQueue
from graymq.client.spark.options import SourceOptions
from graymq.client.spark.partition import QueueRange, read_range
from graymq.client.spark.sink_options import SinkOptions
from graymq.client.spark.sink_schema import SinkColumns
from graymq.client.spark.sink_task import PartitionWriter, TaskIdentity
from graymq.client.sync import SyncProducer, SyncPullConsumer
from graymq.core.queue_layout import slot_queue_ids
from graymq.nameserver_api.client import NameServerClient
from tests.support.cluster import Cluster
from tests.support.spans import spans, worker_spans  # noqa: F401 - the fixtures

pytestmark = pytest.mark.spark
IN, OUT, PRODUCERS, STAGE, STAGE_OUT = "STAGE_IN", "STAGE_OUT", "STAGE_A", "STAGE_C", "STAGE_C_OUT"
QUEUES, GRAY, SLOTS = 4, 2, 2
MESSAGES = 6


def lane_topics(cluster: Cluster) -> None:
    cluster.add_broker("broker-a")
    for topic in (IN, OUT):
        cluster.create_topic(topic, QUEUES, GRAY, lanes=SLOTS)

    async def switches(ns: NameServerClient) -> None:
        for group in (PRODUCERS, STAGE, STAGE_OUT):
            await ns.set_switch(group, True)

    cluster.ns_call(switches)


def v3_queues(cluster: Cluster, topic: str) -> list[MessageQueue]:
    route = cluster.ns_call(lambda ns: ns.get_route(topic))
    slot = dict(route.lanes or {})["v3"]
    total = QUEUES + (SLOTS - 1) * GRAY
    return [MessageQueue(topic, "broker-a", q) for q in slot_queue_ids(total, GRAY, SLOTS, slot)]


def send_in_v3(ns: str) -> dict[str, str]:
    """body -> the msg id the producer's send of it (in v3) stored it under."""
    producer = SyncProducer(PRODUCERS, ns, lane="v3")
    producer.start()
    try:
        results = {f"m{i}": producer.send(Message(IN, f"m{i}".encode())) for i in range(MESSAGES)}
    finally:
        producer.stop()
    assert all(r.lane == "v3" for r in results.values())
    return {body: r.msg_id for body, r in results.items()}


def stored(ns: str, queues: list[MessageQueue]) -> dict[MessageQueue, list[Any]]:
    """The messages in v3's ``queues``."""
    reader = SyncPullConsumer("STAGE_CHECK", ns, lane="v3", gray=True, register=False)
    try:
        return {mq: reader.pull(mq, 0, 64).messages if reader.max_offset(mq) else [] for mq in queues}
    finally:
        reader.stop()


def stored_out(ns: str, queues: list[MessageQueue]) -> dict[str, dict[str, str]]:
    """body -> properties of every message in ``queues`` of STAGE_OUT."""
    return {m.body.decode(): dict(m.properties) for messages in stored(ns, queues).values() for m in messages}


def span_id(traceparent: str) -> str:
    return traceparent.split("-")[2]


def check_one_trace(a_sends: dict[str, Any], receives: list[dict[str, Any]], c_sends: list[dict[str, Any]],
                    out: dict[str, dict[str, str]]) -> None:
    """Spans as (trace id, span id, parent id, lane, links) dicts: A's send per body, the stage's receives and sends;
    ``out``: STAGE_OUT's messages' properties per body."""
    assert {link for r in receives for link in r["links"]} == {a["span_id"] for a in a_sends.values()}
    assert {r["lane"] for r in receives} == {"v3"}
    assert len(c_sends) == MESSAGES and set(out) == set(a_sends)
    by_span = {c["span_id"]: c for c in c_sends}
    for body, properties in out.items():
        c_send, a_send = by_span[span_id(properties["traceparent"])], a_sends[body]
        assert (c_send["trace_id"], c_send["parent_id"]) == (a_send["trace_id"], a_send["span_id"])
        assert c_send["lane"] == a_send["lane"] == "v3"
        assert properties["traceparent"].split("-")[1] == a_send["trace_id"]


def sdk_span(span: Any) -> dict[str, Any]:
    attributes = span.attributes or {}
    return {"name": span.name, "trace_id": f"{span.context.trace_id:032x}", "span_id": f"{span.context.span_id:016x}",
            "parent_id": f"{span.parent.span_id:016x}" if span.parent else None, "lane": attributes.get("graymq.lane"),
            "links": [f"{link.context.span_id:016x}" for link in span.links], "body_id": attributes.get(
                "messaging.message.id")}


def json_span(span: dict[str, Any]) -> dict[str, Any]:
    return {"name": span["name"], "trace_id": span["context"]["trace_id"][2:],
            "span_id": span["context"]["span_id"][2:], "parent_id": (span["parent_id"] or "0x")[2:] or None,
            "lane": span["attributes"].get("graymq.lane"), "links": [link["context"]["span_id"][2:]
                                                                     for link in span["links"]]}


def a_sends_of(finished: list[dict[str, Any]], msg_ids: dict[str, str]) -> dict[str, dict[str, Any]]:
    by_id = {s["body_id"]: s for s in finished if s["name"] == f"send {IN}"}
    return {body: by_id[msg_id] for body, msg_id in msg_ids.items()}


def test_the_stage_tasks_receive_and_send_spans_continue_the_producers_trace_in_the_lane(cluster, spans):  # noqa: F811
    lane_topics(cluster)
    msg_ids = send_in_v3(cluster.ns_url)
    reading = SourceOptions.parse({"nameserver": cluster.ns_url, "topic": IN, "group": STAGE, "lane": "v3"})
    rows = []
    for mq, messages in stored(cluster.ns_url, v3_queues(cluster, IN)).items():
        for batch in read_range(reading, QueueRange(IN, mq.broker_name, mq.queue_id, 0, len(messages))):
            rows += [(row["body"], dict(row["properties"])) for row in batch.to_pylist()]
    assert len(rows) == MESSAGES
    writing = SinkOptions.parse({"nameserver": cluster.ns_url, "topic": OUT, "lane": "v3",
                                 "producerGroup": STAGE_OUT})
    columns = SinkColumns.check(StructType([StructField("body", BinaryType()), StructField(
        "properties", MapType(StringType(), StringType()))]), OUT)
    assert PartitionWriter(writing, columns, TaskIdentity("spans", 0, 0)).write(rows) == MESSAGES
    finished = [sdk_span(s) for s in spans.get_finished_spans()]
    check_one_trace(a_sends_of(finished, msg_ids), [s for s in finished if s["name"] == f"receive {IN}"],
                    [s for s in finished if s["name"] == f"send {OUT}"], stored_out(cluster.ns_url,
                                                                                    v3_queues(cluster, OUT)))


def test_through_spark_the_workers_spans_of_the_stage_are_in_the_producers_trace_in_the_lane(
        cluster, spark, spans, worker_spans):  # noqa: F811
    lane_topics(cluster)
    msg_ids = send_in_v3(cluster.ns_url)
    frame = spark.read.format("graymq").options(nameserver=cluster.ns_url, topic=IN, group=STAGE, lane="v3",
                                                startingOffsets="earliest").load()
    frame.select("body", "properties").write.format("graymq").options(
        nameserver=cluster.ns_url, topic=OUT, lane="v3", producerGroup=STAGE_OUT).mode("append").save()
    in_workers = [json_span(s) for s in worker_spans()]
    check_one_trace(a_sends_of([sdk_span(s) for s in spans.get_finished_spans()], msg_ids),
                    [s for s in in_workers if s["name"] == f"receive {IN}"],
                    [s for s in in_workers if s["name"] == f"send {OUT}"],
                    stored_out(cluster.ns_url, v3_queues(cluster, OUT)))
