"""Gray consumers (lane ``gray``) do not keep asking the name server for the slot of their group's retry topic.

The brokers make ``%RETRY%<group>`` after the consumers' first heartbeats, so the ``gray`` lane holds no slot of it
at first. The name server's heartbeat takes it (every topic a client reports, docs/lanes.md *Capacity*) and its
answer names the slot; the consumers then read the route again, once, instead of each asking for the slot at each
rebalance (with an overloaded name server timing out, that was a loop: several hundred requests per fleet bench).
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from graymq.client import ClientConfig, PushConsumer
from graymq.core.queue_layout import GRAY_LANE
from graymq.nameserver_api.client import NameServerClient
from graymq.protocol.constants import RETRY_GROUP_TOPIC_PREFIX
from graymq.protocol.errors import NameServerError
from tests.support.cluster import Cluster

pytestmark = pytest.mark.integration
TOPIC, GROUP = "TOPIC_GRAY_RETRY_SLOT", "GID_GRAY_RETRY_SLOT"
RETRY = f"{RETRY_GROUP_TOPIC_PREFIX}{GROUP}"
CONSUMERS = 3
REBALANCES = 8  # periods watched once the retry topic's route names the slot
INTERVAL_S = 0.2  # between rebalances
HEARTBEAT_S = 1.0  # to the name server: rebalances read the retry topic's route before a heartbeat takes its slot


async def watch_requests(ns: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Counter[str], Counter[str]]:
    """(lane-slot requests over the whole run, route reads over ``REBALANCES`` periods once the retry topic's route
    names the ``gray`` lane's slot) per topic, of ``CONSUMERS`` gray consumers of one process. A lane-slot request
    times out, as it did on the fleet bench's overloaded name server."""
    takes: Counter[str] = Counter()
    reads: Counter[str] = Counter()
    get_route = NameServerClient.get_route

    async def timing_out_take(self: NameServerClient, topic: str, lane: str) -> object:
        takes[topic] += 1
        raise NameServerError(f"POST /v1/topics/{topic}/lanes/{lane} failed on every name server: ReadTimeout")

    async def counted_get_route(self: NameServerClient, topic: str) -> object:
        reads[topic] += 1
        return await get_route(self, topic)

    monkeypatch.setattr(NameServerClient, "take_lane_slot", timing_out_take)
    monkeypatch.setattr(NameServerClient, "get_route", counted_get_route)
    config = ClientConfig.from_env(ns)
    consumers = [PushConsumer(GROUP, client_id=f"c-gray-{i}", listener=lambda _: None, lane=GRAY_LANE,
                              config=config, nameserver_interval_s=HEARTBEAT_S, rebalance_interval_s=INTERVAL_S)
                 for i in range(CONSUMERS)]
    for consumer in consumers:
        consumer.subscribe(TOPIC)
        await consumer.start()
    try:
        await slot_in_route(consumers[0], timeout=20.0)
        await asyncio.sleep(INTERVAL_S * 2)  # rebalances under way when it showed finish
        reads.clear()
        await asyncio.sleep(INTERVAL_S * REBALANCES)
    finally:
        for consumer in consumers:
            await consumer.stop()
    return takes, reads


async def slot_in_route(consumer: PushConsumer, timeout: float) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while (route := consumer.routes.cached(RETRY)) is None or route.slot_of_lane(GRAY_LANE) is None:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"the retry topic's route never named the gray lane's slot: {route}")
        await asyncio.sleep(0.05)


def test_gray_consumers_learn_their_retry_topics_slot_from_the_heartbeat(cluster: Cluster,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    cluster.add_broker("broker-a")
    cluster.create_topic(TOPIC, 4, 2)
    takes, reads = asyncio.run(watch_requests(cluster.ns_url, monkeypatch))
    assert takes == Counter(), f"lane-slot requests: {dict(takes)}"
    assert reads[RETRY] <= 1 and reads[TOPIC] <= 1, f"route reads over {REBALANCES} rebalances: {dict(reads)}"
