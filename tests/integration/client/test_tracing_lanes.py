"""A lane in a trace: a message sent in lane v3, handled by a v3 consumer that relays it, handled again by a v3
consumer of another group: every span of the chain names the lane (``graymq.lane``) and all are one trace (real
name server and broker, OpenTelemetry SDK with an in-memory exporter)."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from graymq.client import Message, MessageExt, Producer, PushConsumer
from tests.support.cluster import Cluster
from tests.support.spans import spans  # noqa: F401 - the fixture

pytestmark = pytest.mark.integration
ORDERS, RELAYED = "TOPIC_LANE_TRACE", "TOPIC_LANE_TRACE_OUT"


async def relay_chain(ns: str) -> list[MessageExt]:
    """v3 producer -> ORDERS -> v3 consumer of GID_A relaying to RELAYED -> v3 consumer of GID_B."""
    arrived: list[MessageExt] = []
    done = asyncio.Event()
    relay_out = Producer("PID_LANE_RELAY", ns, client_id="relay-out", heartbeat_interval_s=0.5)

    async def relay(messages: list[MessageExt]) -> None:
        for m in messages:
            await relay_out.send(Message(RELAYED, m.body))

    async def land(messages: list[MessageExt]) -> None:
        arrived.extend(messages)
        done.set()

    first = PushConsumer("GID_A", ns, client_id="a-v3", listener=relay, lane="v3", consume_from="first",
                         nameserver_interval_s=0.5)
    first.subscribe(ORDERS)
    last = PushConsumer("GID_B", ns, client_id="b-v3", listener=land, lane="v3", consume_from="first",
                        nameserver_interval_s=0.5)
    last.subscribe(RELAYED)
    origin = Producer("PID_LANE_ORIGIN", ns, client_id="origin-v3", lane="v3", heartbeat_interval_s=0.5)
    started = [first, last, relay_out, origin]
    try:
        for client in started:
            await client.start()
        sent = await origin.send(Message(ORDERS, b"order-1"))
        assert sent.lane == "v3", sent
        await asyncio.wait_for(done.wait(), 60)
        return arrived
    finally:
        for client in reversed(started):
            await client.stop()


def test_every_span_of_a_relay_chain_in_lane_v3_names_the_lane_in_one_trace(cluster: Cluster,
                                                                           spans: InMemorySpanExporter) -> None:  # noqa: F811 - the fixture
    cluster.add_broker("broker-a")
    cluster.create_topic(ORDERS, 4, 2, lanes=2)
    cluster.create_topic(RELAYED, 4, 2, lanes=2)
    [landed] = asyncio.run(relay_chain(cluster.ns_url))
    assert landed.body == b"order-1"
    by_name: dict[str, list[ReadableSpan]] = {}
    for span in spans.get_finished_spans():
        by_name.setdefault(span.name, []).append(span)
    [send], [process], [relay], [process_relayed] = (
        by_name[f"send {ORDERS}"], by_name[f"process {ORDERS}"], by_name[f"send {RELAYED}"],
        by_name[f"process {RELAYED}"])
    chain = [send, process, relay, process_relayed]
    assert [(s.attributes or {}).get("graymq.lane") for s in chain] == ["v3"] * 4
    assert all((s.attributes or {}).get("graymq.gray") is True for s in chain)
    assert {s.context.trace_id for s in chain if s.context} == {send.context.trace_id}
    for parent, child in zip(chain, chain[1:], strict=False):  # each span the child of the one before
        assert child.parent is not None and parent.context is not None
        assert child.parent.span_id == parent.context.span_id
