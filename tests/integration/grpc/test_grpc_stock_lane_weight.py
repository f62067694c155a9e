"""A lane's weight reaches stock consumers: QueryAssignment gives a stock consumer of lane v3 (put there by a host
rule) v3's slot plus the base queues v3's weight hands it, split by the rule graymq's own consumers follow
(``core.queue_layout.lane_weight_shares``), and a base stock consumer the base queues left; weight 0 gives them back.
"""

from __future__ import annotations

import asyncio

import pytest

from graymq.core.queue_layout import lane_weight_shares, slot_queue_ids
from graymq.nameserver_api.client import NameServerClient
from tests.integration.grpc.test_grpc_stock_gray import eventually
from tests.support.cli import graymq
from tests.support.cluster import Cluster
from tests.support.stock_raw import RawStockConsumer

pytestmark = pytest.mark.integration

QUEUES, GRAY, SLOTS = 6, 2, 2
TOTAL = QUEUES + (SLOTS - 1) * GRAY
TOPIC, GROUP = "GRPC_LANE_WEIGHT", "GID_LANE_WEIGHT"


def v3_slot(cluster: Cluster) -> set[int]:
    """The queue ids of the slot v3 holds on the topic (none yet: empty)."""
    route = cluster.ns_call(lambda ns: ns.get_route(TOPIC))
    slot = dict(route.lanes or {}).get("v3")
    return set() if slot is None else set(slot_queue_ids(TOTAL, GRAY, SLOTS, slot))


async def assigned_until(consumer: RawStockConsumer, expected: set[int], what: str, timeout: float = 30.0) -> None:
    """Ask QueryAssignment until it answers ``expected`` (the name server's answer reaches the broker soon)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while (ids := await consumer.assigned()) != expected:
        assert asyncio.get_running_loop().time() < deadline, f"{what}: still {sorted(ids)} after {timeout}s"
        await asyncio.sleep(0.3)


def test_a_stock_consumer_of_a_lane_takes_its_lanes_weighted_share_of_the_base_queues_and_base_the_rest(
        grpc_cluster: Cluster, grpc_endpoint: str) -> None:
    grpc_cluster.create_topic(TOPIC, QUEUES, GRAY, lanes=SLOTS)

    async def switch(ns: NameServerClient) -> None:
        await ns.set_switch(GROUP, True)

    grpc_cluster.ns_call(switch)
    graymq(grpc_cluster.ns_url, "gray", "rule", GROUP, "--label", "host=orders-v3-*", "--lane", "v3", "on")
    base = set(range(TOTAL)) - set().union(*(slot_queue_ids(TOTAL, GRAY, SLOTS, s) for s in range(SLOTS)))
    share = set(lane_weight_shares(TOTAL, GRAY, SLOTS, (("v3", 50),)))
    assert share and share < base

    async def scenario() -> None:
        v1 = RawStockConsumer(grpc_endpoint, "orders-v1-5d8f@21@0@a1", GROUP, TOPIC)
        v3 = RawStockConsumer(grpc_endpoint, "orders-v3-0a1b@22@0@c3", GROUP, TOPIC)
        try:
            for consumer in (v1, v3):
                await consumer.open()
            slot = await eventually(lambda: v3_slot(grpc_cluster), "v3 to take a slot")
            assert await v3.assigned() == slot and await v1.assigned() == base
            graymq(grpc_cluster.ns_url, "gray", "weight", GROUP, "50", "--lane", "v3")
            await assigned_until(v3, slot | share, "v3's share at weight 50")
            assert await v1.assigned() == base - share
            graymq(grpc_cluster.ns_url, "gray", "weight", GROUP, "0", "--lane", "v3")
            await assigned_until(v1, base, "v3's share back to base at weight 0")
            assert await v3.assigned() == slot
        finally:
            await v1.close()
            await v3.close()

    asyncio.run(scenario())
