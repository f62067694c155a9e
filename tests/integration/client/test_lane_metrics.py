"""A lane in the metrics of real processes: a v3 producer's sends show under ``lane="v3"`` on the broker's
``/metrics``, a v3 consumer's failures and the consumer itself on the name server's (consumers report their gray
side per lane), beside the base side's under ``lane="base"`` (docs/lanes.md, "Lanes in traces and metrics")."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from graymq.client import ConsumeStatus, Message, MessageExt, Producer, PushConsumer
from tests.support.cluster import Cluster
from tests.support.metrics import Scrape, scrape

pytestmark = pytest.mark.integration
TOPIC, GROUP = "TOPIC_LANE_METRICS", "GID_LANE_METRICS"
V3 = {"side": "gray", "lane": "v3"}


async def send_and_consume(ns: str) -> Scrape:
    """A v3 and a base producer send 3 each; the v3 consumer fails its first delivery, a base consumer takes the
    base ones; the name server's metrics once they show the v3 consumer's health (while it is live)."""
    tries: list[bytes] = []

    async def v3_listener(messages: list[MessageExt]) -> ConsumeStatus:
        tries.extend(m.body for m in messages)
        return ConsumeStatus.RECONSUME_LATER if len(tries) == 1 else ConsumeStatus.CONSUME_SUCCESS

    consumers = [PushConsumer(GROUP, ns, client_id="c-v3", listener=v3_listener, lane="v3", consume_from="first",
                              nameserver_interval_s=0.5),
                 PushConsumer(GROUP, ns, client_id="c-base", listener=lambda _: None, consume_from="first",
                              nameserver_interval_s=0.5)]
    producers = [Producer("PID_LANE_METRICS", ns, client_id=f"p-{lane}", lane=lane, heartbeat_interval_s=0.5)
                 for lane in ("v3", None)]
    for client in [*consumers, *producers]:
        if isinstance(client, PushConsumer):
            client.subscribe(TOPIC)
        await client.start()
    try:
        for producer in producers:
            for i in range(3):
                await producer.send(Message(TOPIC, f"{producer.client_id}-{i}".encode()))
        return await asyncio.to_thread(scrape_until, f"{ns}/metrics", reported, "the health of both lanes reported")
    finally:
        for client in [*producers, *consumers]:
            await client.stop()


def reported(metrics: Scrape) -> bool:
    """The v3 consumer's failure and two deliveries heard, and the base consumer's three (the failed message's
    retry may go either way: a retry topic without the lane's slot yet sends it to base,
    ``send_back.retry_queue_ids``)."""
    def messages(outcome: str, **labels: str) -> float:
        return metrics.value("graymq_consumer_messages_total", group=GROUP, outcome=outcome, **labels) or 0

    return (messages("failed", **V3) == 1 and messages("consumed", **V3) >= 2
            and messages("consumed", side="normal", lane="base") >= 3)


def scrape_until(url: str, holds: Callable[[Scrape], bool], what: str, timeout: float = 20.0) -> Scrape:
    deadline = time.monotonic() + timeout
    while not holds(metrics := scrape(url)):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not hold within {timeout}s")
        time.sleep(0.2)
    return metrics


def test_a_lanes_sends_failures_and_clients_show_under_its_lane_label(cluster: Cluster) -> None:
    broker = cluster.add_broker("broker-a", GRAYMQ_BROKER_METRICS_PORT="0",
                                GRAYMQ_BROKER_DELAY_LEVELS_S="0.05,0.05,0.05")
    cluster.create_topic(TOPIC, 4, 2, lanes=2)
    health = asyncio.run(send_and_consume(cluster.ns_url))
    assert broker.ready_info is not None
    stored = scrape(f"http://{broker.ready_info['metrics']}/metrics")
    assert stored.value("graymq_broker_put_messages_total", topic=TOPIC, gray="true", lane="v3") == 3
    assert stored.value("graymq_broker_put_messages_total", topic=TOPIC, gray="false", lane="base") == 3
    assert health.value("graymq_consumer_messages_total", group=GROUP, **V3, outcome="sent_back") == 1
    assert health.value("graymq_consumer_messages_total", group=GROUP, side="gray", lane="gray",
                        outcome="failed") == 0  # the gray lane is another lane: none of v3's failures
    assert health.value("graymq_consumer_messages_total", group=GROUP, side="normal", lane="base",
                        outcome="failed") == 0
    assert health.value("graymq_nameserver_live_clients", group=GROUP, role="consumer", gray="true", lane="v3") == 1
