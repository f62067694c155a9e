"""Stock SDK clients in lanes, decided on the broker: the Python SDK's producers and simple consumers in processes of
their own under the host names of three Deployments' pods (``unshare --uts``): ``orders-v1-*`` (base),
``orders-v2-*`` and ``orders-v3-*``, put in lanes ``v2`` and ``v3`` by two all-groups host-glob rules. Each
version's producer sends while its consumer receives; the base producer's first messages carry the W3C baggage entry
``graymq.lane=v3``, and a Node.js SDK producer on a base pod marks its messages with the ``graymq.lane`` property:
both reach the v3 consumer. Then ``graymq gray promote GROUP --lane v2`` while all of them go on producing: nothing
is lost, no message stored in a lane's queues reaches a consumer outside that lane (v2's drains its lane before it
turns base), none of v3's is touched by the promote, and the v3-marked messages reach the v3 consumer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graymq.core.queue_layout import slot_queue_ids
from graymq.nameserver_api.client import NameServerClient
from tests.integration.grpc.test_grpc_stock_gray import Acked, Received, until
from tests.support.cli import graymq
from tests.support.cluster import Cluster
from tests.support.node_sdk import node_sdk
from tests.support.stock_reads import stored_messages
from tests.support.stock_sdk import StockProducer, StockSimpleConsumer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(110, func_only=True)]  # the test alone: ~25 s

QUEUES, GRAY, LANE_SLOTS = 6, 2, 3
TOTAL = QUEUES + (LANE_SLOTS - 1) * GRAY  # a broker's queues: base and slot 0, then slots 1 and 2 appended
TOPIC, GROUP = "GRPC_LANES", "GID_LANES"  # a stock producer's producer group is its topic
HOSTS = {"v1": "orders-v1-5d8f2", "v2": "orders-v2-7f9c4", "v3": "orders-v3-0a1b6"}
MARKED = 10  # the base producer's first messages, marked v3 by baggage
SENDS = 4000  # more than a producer sends in the test: each is killed once enough went through


def lanes_for_v2_and_v3_pods(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, QUEUES, GRAY, lanes=LANE_SLOTS)

    async def switches(ns: NameServerClient) -> None:
        for group in (GROUP, TOPIC):
            await ns.set_switch(group, True)

    cluster.ns_call(switches)
    for version in ("v2", "v3"):
        graymq(cluster.ns_url, "gray", "rule", "--all-groups", "--label", f"host=orders-{version}-*", "--lane",
               version, "on")


def body(version: str, i: int) -> str:
    """The body of a producer's ``i``-th message."""
    return f"v1-marked-{i}" if version == "v1" and i < MARKED else f"{version}-{i}"


def producer(endpoint: str, home: Path, version: str) -> StockProducer:
    messages = [{"body": body(version, i)} for i in range(SENDS)]
    if version == "v1":
        for i in range(MARKED):
            messages[i]["properties"] = {"baggage": "tenant=acme, graymq.lane=v3"}  # type: ignore[assignment]
    return StockProducer(endpoint, TOPIC, messages, home / f"{version}-producer", host=HOSTS[version],
                         interval_s=0.02)


def sides(cluster: Cluster) -> dict[str, tuple[str | None, str]]:
    """client id -> (the lane it reports being in, its state) of the group's live consumers."""
    listed = cluster.ns_call(lambda ns: ns.group_clients(GROUP, "consumer"))
    return {c.client_id: (c.in_lane, c.state.value) for c in listed.clients if not c.stale}


def lane_queues(cluster: Cluster) -> dict[str, set[int]]:
    """The queue ids of each lane's slot on the broker, as the topic's route says now."""
    route = cluster.ns_call(lambda ns: ns.get_route(TOPIC))
    return {lane: set(slot_queue_ids(TOTAL, GRAY, LANE_SLOTS, slot)) for lane, slot in route.lanes or ()}


def test_stock_clients_in_two_lanes_and_base_a_promote_of_v2_while_all_produce_loses_nothing_and_leaks_nothing(
        grpc_cluster: Cluster, grpc_endpoint: str, node_sdk_dir: Path, tmp_path: Path) -> None:
    lanes_for_v2_and_v3_pods(grpc_cluster)
    consumers = {v: Received(StockSimpleConsumer(grpc_endpoint, GROUP, TOPIC, tmp_path / f"{v}-consumer",
                                                 host=HOSTS[v])) for v in HOSTS}
    producers: dict[str, StockProducer] = {}
    try:
        until("the consumers in their lanes", lambda: [sides(grpc_cluster).get(consumers[v].client_id) for v in HOSTS]
              == [(None, "NORMAL"), ("v2", "GRAY"), ("v3", "GRAY")], timeout=30)
        producers = {v: producer(grpc_endpoint, tmp_path, v) for v in HOSTS}
        acked = {v: Acked(p, v) for v, p in producers.items()}
        for taken in acked.values():
            taken.at_least(MARKED + 10)
        node_marked = [{"body": f"node-marked-{i}", "properties": {"graymq.lane": "v3"}} for i in range(MARKED)]
        by_node = node_sdk({"endpoint": grpc_endpoint, "topic": TOPIC, "messages": node_marked},
                           tmp_path / "node-producer", sdk=node_sdk_dir, hostname="orders-v1-node-3c2d1")
        assert all("message_id" in r for r in by_node), by_node
        slots = lane_queues(grpc_cluster)  # v2 gives its slot back at the promote's end: read it now
        assert set(slots) >= {"v2", "v3"}, slots

        promote = graymq(grpc_cluster.ns_url, "gray", "promote", GROUP, "--lane", "v2", "--producer-group", TOPIC,
                         "--timeout", "60", "--json", check=False, timeout=90)
        assert promote.returncode == 0, promote.stdout + promote.stderr
        assert json.loads(promote.stdout)["state"] == "SUCCEEDED"
        for taken in acked.values():  # the producers go on through the promote and after it
            taken.at_least(len(taken.results) + 10)
        for p in producers.values():
            p.kill()
        sent = {body(v, i) for v, taken in acked.items() for i in range(len(taken.take()))}
        sent |= {m["body"] for m in node_marked}
        until(f"the {len(sent)} messages sent to be received", lambda: sent <= set().union(
            *(set(c.bodies) for c in consumers.values())), timeout=40)
        stored = {m.body.decode(): m.queue_id for m in stored_messages(grpc_cluster.ns_url, TOPIC, TOTAL, GRAY,
                                                                         len(sent))}
        assert sent <= set(stored)
        # a send stored as its producer was killed is in the log unacknowledged: delivered all the same, maybe later
        until(f"the {len(stored)} messages stored to be received", lambda: set(stored) <= set().union(
            *(set(c.bodies) for c in consumers.values())), timeout=40)
        received = {v: set(c.bodies) for v, c in consumers.items()}
        assert not any(c.errors for c in consumers.values()), {v: c.errors for v, c in consumers.items()}
        in_slot = {lane: {body for body, q in stored.items() if q in queues} for lane, queues in slots.items()}
        assert in_slot["v2"] and in_slot["v3"], in_slot
        marked = {f"{sdk}-marked-{i}" for sdk in ("v1", "node") for i in range(MARKED)}
        assert marked <= in_slot["v3"] <= received["v3"]
        assert not in_slot["v2"] - received["v2"] and not in_slot["v2"] & (received["v1"] | received["v3"])
        assert not in_slot["v3"] & (received["v1"] | received["v2"])  # v3 ran on untouched
        base = set(stored) - in_slot["v2"] - in_slot["v3"]
        assert not base & received["v3"] and {b for b in in_slot["v3"] if b.startswith("v3-")} == {
            b for b in stored if b.startswith("v3-")}
        assert sides(grpc_cluster)[consumers["v2"].client_id] == (None, "NORMAL")
        assert "v2" not in lane_queues(grpc_cluster)  # the promote gave v2's slot back
    finally:
        for p in producers.values():
            p.kill()
        for consumer in consumers.values():
            consumer.stop()
