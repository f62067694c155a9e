"""One trace across two processes: an HTTP-like span in the producer's process, the producer span under it, the
consumer span in the consumer's process under that, the gray side on both (OpenTelemetry SDK, in-memory exporter,
real name server and broker)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.clients import run_scenario

pytestmark = pytest.mark.integration
TOPIC = "TOPIC_TRACE"
GROUP = "GID_TRACE"

_SETUP = """
import asyncio, json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from graymq.client import ConsumeStatus, Message, Producer, PushConsumer

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
nameserver, topic, group = sys.argv[1:4]


def dump():
    print(json.dumps([{"name": s.name, "kind": s.kind.name, "trace_id": f"{s.context.trace_id:032x}",
                       "span_id": f"{s.context.span_id:016x}",
                       "parent": f"{s.parent.span_id:016x}" if s.parent else None,
                       "attributes": dict(s.attributes)} for s in exporter.get_finished_spans()]), flush=True)
"""

PRODUCER = _SETUP + """
async def main():
    producer = Producer(group, nameserver, gray=True)
    await producer.start()
    try:
        with trace.get_tracer("shop").start_as_current_span("POST /orders", kind=trace.SpanKind.SERVER):
            await producer.send(Message(topic, b"order-1", tags="created"))
        with trace.get_tracer("shop").start_as_current_span("POST /orders/batch", kind=trace.SpanKind.SERVER):
            await producer.send_batch([Message(topic, b"order-2"), Message(topic, b"order-3")])
    finally:
        await producer.stop()
    dump()

asyncio.run(main())
"""

CONSUMER = _SETUP + """
async def main():
    received = asyncio.Event()

    bodies = set()

    async def on_messages(messages):
        bodies.update(m.body for m in messages)
        if len(bodies) == 3:
            received.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(group, nameserver, listener=on_messages, gray=True, consume_from="first")
    consumer.subscribe(topic)
    await consumer.start()
    print("ready", flush=True)
    try:
        await asyncio.wait_for(received.wait(), 60)
    finally:
        await consumer.stop()
    dump()

asyncio.run(main())
"""


def spans_of(output: str) -> dict[str, list[dict]]:
    spans: dict[str, list[dict]] = {}
    for span in json.loads(output.strip().splitlines()[-1]):
        spans.setdefault(span["name"], []).append(span)
    return spans


def test_one_trace_runs_from_the_request_through_the_producer_to_the_consumer_process(cluster, tmp_path: Path) -> None:
    cluster.add_broker("broker-a")
    cluster.create_topic(TOPIC, 4, 2)

    async def switch_on() -> None:
        admin = cluster.admin()
        try:
            await admin.set_switch(GROUP, True, "test")
        finally:
            await admin.close()

    run_scenario(switch_on, timeout=30)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    args = [cluster.ns_url, TOPIC, GROUP]
    (tmp_path / "producer.py").write_text(PRODUCER)
    (tmp_path / "consumer.py").write_text(CONSUMER)
    consumer = subprocess.Popen([sys.executable, str(tmp_path / "consumer.py"), *args], env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert consumer.stdout is not None and consumer.stdout.readline().strip() == "ready", consumer.stderr
        produced = subprocess.run([sys.executable, str(tmp_path / "producer.py"), *args], env=env, text=True,
                                  capture_output=True, timeout=60)
        assert produced.returncode == 0, produced.stderr[-3000:]
        consumed, errors = consumer.communicate(timeout=60)
        assert consumer.returncode == 0, errors[-3000:]
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    producer_side, consumer_side = spans_of(produced.stdout), spans_of(consumed)
    [request], [batch_request] = producer_side["POST /orders"], producer_side["POST /orders/batch"]
    send, batch_send = sorted(producer_side[f"send {TOPIC}"], key=lambda s: "messaging.batch.message_count" in
                              s["attributes"])
    processes = consumer_side[f"process {TOPIC}"]
    by_parent: dict[str, list[dict]] = {}
    for process in processes:
        by_parent.setdefault(process["parent"], []).append(process)
        assert process["kind"] == "CONSUMER" and process["attributes"]["graymq.gray"] is True
        assert process["attributes"]["messaging.consumer.group.name"] == GROUP
    [process] = by_parent[send["span_id"]]  # the single send: request -> send -> process, one trace
    assert request["trace_id"] == send["trace_id"] == process["trace_id"]
    assert send["parent"] == request["span_id"] and send["kind"] == "PRODUCER"
    assert send["attributes"]["graymq.gray"] is True
    assert send["attributes"]["messaging.message.id"] == process["attributes"]["messaging.message.id"]
    # the batch: one send span for both messages, each delivery its child, in the batch request's trace
    assert batch_send["parent"] == batch_request["span_id"]
    assert batch_send["attributes"]["messaging.batch.message_count"] == 2
    assert len(by_parent[batch_send["span_id"]]) == 2 and len(processes) == 3
    assert {p["trace_id"] for p in by_parent[batch_send["span_id"]]} == {batch_request["trace_id"]}
