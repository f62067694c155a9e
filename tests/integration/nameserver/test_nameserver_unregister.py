"""Brokers leave the routes: a registration's lease is a few of the broker's registration intervals, and a broker
stopping cleanly unregisters (only the process at the routed address; a set's leader only without a live in-sync
follower to take the route over)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

pytestmark = [pytest.mark.integration, pytest.mark.name_server(replica_lease_seconds=30)]
TOPIC = "TopicGone"


def register(ns: TestClient, name: str, address: str, replica: int | None = None, **extra: Any) -> dict[str, Any]:
    body = {"broker_name": name, "address": address, "replica_id": replica,
            "topics": [{"topic": TOPIC, "queue_nums": 4, "gray_queue_nums": 2}], **extra}
    response = ns.post("/v1/brokers/heartbeat", json=body)
    assert response.status_code == 200, response.text
    return dict(response.json())


def unregister(ns: TestClient, name: str, address: str, replica: int | None = None) -> bool:
    response = ns.post("/v1/brokers/unregister", json={"broker_name": name, "address": address, "replica_id": replica})
    assert response.status_code == 200, response.text
    return bool(response.json()["unrouted"])


def routed(ns: TestClient) -> dict[str, str]:
    response = ns.get(f"/v1/topics/{TOPIC}/route")
    return {b["broker_name"]: b["address"] for b in response.json()["brokers"]} if response.status_code == 200 else {}


def live_replicas(ns: TestClient, name: str) -> set[int]:
    [broker] = [b for b in ns.get("/v1/brokers").json() if b["broker_name"] == name]
    return {r["replica_id"] for r in broker["replica_set"]["replicas"] if r["live"]}


def unique() -> str:
    return f"broker-{uuid.uuid4().hex[:6]}"


def test_the_lease_is_a_few_registration_intervals_and_at_most_the_configured_one(ns: TestClient) -> None:
    assert register(ns, unique(), "10.0.0.1:1", register_interval_s=3)["lease_seconds"] == 12
    assert register(ns, unique(), "10.0.0.1:2", register_interval_s=0.5)["lease_seconds"] == 6  # the minimum
    assert register(ns, unique(), "10.0.0.1:3")["lease_seconds"] == 120  # a broker that does not say


def test_an_unregistered_broker_leaves_the_route_at_once_but_not_a_process_registered_since_elsewhere(
        ns: TestClient) -> None:
    name, other = unique(), unique()
    register(ns, name, "10.0.0.1:10911")
    register(ns, other, "10.0.0.2:10911")
    assert not unregister(ns, name, "10.0.0.9:10911")  # an older process of the name, stopping late
    assert routed(ns)[name] == "10.0.0.1:10911"
    assert unregister(ns, name, "10.0.0.1:10911")
    assert name not in routed(ns) and other in routed(ns)
    assert name not in {b["broker_name"] for b in ns.get("/v1/brokers").json()}
    assert not unregister(ns, name, "10.0.0.1:10911")  # once is enough
    register(ns, name, "10.0.0.1:10911")  # back: routed again with its topics
    assert routed(ns)[name] == "10.0.0.1:10911"


def test_a_sets_route_stays_while_a_live_in_sync_follower_can_take_it_over(ns: TestClient) -> None:
    name = unique()

    def beat(replica: int, epoch: int, in_sync: list[int] | None = None) -> None:
        body = {"broker_name": name, "replica_id": replica, "address": f"10.0.1.{replica}:10911",
                "replication": "sync", "epoch": epoch, "log_end_offset": 0, "in_sync": in_sync}
        assert ns.post("/v1/brokers/replicas/heartbeat", json=body).status_code == 200

    beat(0, 0)
    beat(1, 0)
    beat(0, 1, in_sync=[0, 1])
    register(ns, name, "10.0.1.0:10911", replica=0)
    assert routed(ns)[name] == "10.0.1.0:10911" and live_replicas(ns, name) == {0, 1}

    assert not unregister(ns, name, "10.0.1.0:10911", replica=0)  # replica 1 is elected when the lease runs out
    assert routed(ns)[name] == "10.0.1.0:10911" and live_replicas(ns, name) == {1}
    assert not unregister(ns, name, "10.0.1.1:10911", replica=1)  # a follower never held the route
    assert live_replicas(ns, name) == set()
    beat(0, 1)  # the leader, back, leads on; with no live follower left, its stop ends the route
    assert unregister(ns, name, "10.0.1.0:10911", replica=0)
    assert name not in routed(ns)
