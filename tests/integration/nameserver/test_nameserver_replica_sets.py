"""Leader election of broker sets through the REST API, on SQLite and PostgreSQL: the first replica leads at epoch
1, the leader's heartbeats renew its lease and set the in-sync replicas (compare-and-set on the epoch), an expired
lease goes to an in-sync follower only, a restarted leader is replaced by a live in-sync follower, the route points
at the leader whatever the followers register, and every election and in-sync change is audited."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

LEASE_S = 0.5
pytestmark = [pytest.mark.integration, pytest.mark.name_server(replica_lease_seconds=LEASE_S)]


def beat(ns: TestClient, name: str, replica: int, epoch: int, log_end: int = 0,
         in_sync: list[int] | None = None) -> dict[str, Any]:
    body = {"broker_name": name, "replica_id": replica, "address": f"10.0.0.{replica + 1}:10911",
            "replication": "sync", "epoch": epoch, "log_end_offset": log_end, "in_sync": in_sync}
    response = ns.post("/v1/brokers/replicas/heartbeat", json=body)
    assert response.status_code == 200, response.text
    return dict(response.json())


def register(ns: TestClient, name: str, replica: int) -> None:
    body = {"broker_name": name, "address": f"10.0.0.{replica + 1}:10911", "replica_id": replica,
            "topics": [{"topic": "TopicRS", "queue_nums": 4, "gray_queue_nums": 0}]}
    assert ns.post("/v1/brokers/heartbeat", json=body).status_code == 200


def route_address(ns: TestClient, name: str) -> str:
    [broker] = [b for b in ns.get("/v1/topics/TopicRS/route").json()["brokers"] if b["broker_name"] == name]
    return str(broker["address"])


def expire() -> None:
    time.sleep(LEASE_S * 1.2)


def unique() -> str:
    return f"broker-{uuid.uuid4().hex[:6]}"


def test_the_first_replica_leads_and_followers_learn_the_leader_and_never_take_the_route(ns: TestClient) -> None:
    name = unique()
    first = beat(ns, name, 0, 0, 100)
    assert (first["epoch"], first["leader_replica_id"], first["in_sync"], first["epoch_start_offset"]) == (
        1, 0, [0], 100)
    register(ns, name, 0)
    follower = beat(ns, name, 1, 0)
    assert (follower["leader_replica_id"], follower["leader_address"]) == (0, "10.0.0.1:10911")
    register(ns, name, 1)
    assert route_address(ns, name) == "10.0.0.1:10911"
    [b] = [b for b in ns.get("/v1/topics/TopicRS/route").json()["brokers"] if b["broker_name"] == name]
    assert [(r["replica_id"], r["leader"], r["in_sync"]) for r in b["replicas"]] == [(0, True, True), (1, False, False)]


def test_the_leaders_heartbeats_keep_its_grpc_address_routed_and_a_new_leader_has_none_until_it_registers(
        ns: TestClient) -> None:
    def grpc_address() -> str | None:  # as stored (a route is served from a cache up to a second old)
        listed = {b["broker_name"]: b for b in ns.get("/v1/brokers").json()}
        return listed[name]["grpc_address"]  # type: ignore[no-any-return]

    name = unique()
    beat(ns, name, 0, 0)
    body = {"broker_name": name, "address": "10.0.0.1:10911", "replica_id": 0, "grpc_address": "10.0.0.1:8081",
            "topics": [{"topic": "TopicRS", "queue_nums": 4, "gray_queue_nums": 0}]}
    assert ns.post("/v1/brokers/heartbeat", json=body).status_code == 200
    assert grpc_address() == "10.0.0.1:8081"
    beat(ns, name, 1, 1)
    for _ in range(3):  # the leader's replica heartbeats renew its route (they used to clear its gRPC address)
        beat(ns, name, 0, 1, in_sync=[0, 1])
        assert grpc_address() == "10.0.0.1:8081"
    expire()
    beat(ns, name, 1, 1)  # the follower takes over at another address: its gRPC endpoint is not known yet
    assert route_address(ns, name) == "10.0.0.2:10911" and grpc_address() is None


def test_only_the_leader_sets_the_in_sync_replicas(ns: TestClient) -> None:
    name = unique()
    beat(ns, name, 0, 0)
    beat(ns, name, 1, 0)
    assert beat(ns, name, 0, 1, 50, in_sync=[1])["in_sync"] == [0, 1]  # the leader is always in it
    assert beat(ns, name, 1, 1, 50, in_sync=[1])["in_sync"] == [0, 1]  # a follower proposes nothing
    entries = ns.get("/v1/audit", params={"object_type": "broker_set", "object_id": name}).json()
    assert [e["action"] for e in entries] == ["in_sync", "elect"]


def test_an_expired_lease_goes_to_an_in_sync_follower_only_and_fences_the_old_leader(ns: TestClient) -> None:
    name = unique()
    beat(ns, name, 0, 0, 10)
    register(ns, name, 0)
    beat(ns, name, 1, 0, 10)
    beat(ns, name, 2, 0, 5)
    beat(ns, name, 0, 1, 10, in_sync=[0, 1])
    expire()
    assert beat(ns, name, 2, 1, 5)["leader_replica_id"] == 0  # not in sync: cannot be elected
    elected = beat(ns, name, 1, 1, 10)
    assert (elected["epoch"], elected["leader_replica_id"], elected["in_sync"], elected["epoch_start_offset"]) == (
        2, 1, [1], 10)
    assert route_address(ns, name) == "10.0.0.2:10911"
    fenced = beat(ns, name, 0, 1, 12, in_sync=[0])  # the old leader comes back: told who leads now
    assert (fenced["epoch"], fenced["leader_replica_id"], fenced["in_sync"]) == (2, 1, [1])
    register(ns, name, 0)
    assert route_address(ns, name) == "10.0.0.2:10911"
    [entry] = [e for e in ns.get("/v1/audit", params={"object_id": name}).json() if e["after"].get("epoch") == 2
               and e["action"] == "elect"]
    assert "lease of replica 0 expired" in entry["reason"]


@pytest.mark.name_server(replica_lease_seconds=60)  # "live" is a lease: the follower's must not end on a slow machine
def test_a_restarted_leader_is_replaced_at_once_by_a_live_in_sync_follower(ns: TestClient) -> None:
    name = unique()
    beat(ns, name, 0, 0, 10)
    beat(ns, name, 1, 0, 10)
    beat(ns, name, 0, 1, 10, in_sync=[0, 1])
    restarted = beat(ns, name, 0, 0, 0)  # epoch 0: it knows nothing, its store may be gone
    assert (restarted["epoch"], restarted["leader_replica_id"]) == (2, 1)


def test_a_lone_leader_that_restarted_leads_again_at_a_new_epoch(ns: TestClient) -> None:
    name = unique()
    beat(ns, name, 0, 0, 10)
    again = beat(ns, name, 0, 0, 10)
    assert (again["epoch"], again["leader_replica_id"]) == (2, 0)


@pytest.mark.parametrize("change", [{"replica_id": 64}, {"replication": "eventual"}, {"epoch": -1},
                                    {"log_end_offset": -5}, {"in_sync": [70]}, {"address": "has space:1"}])
def test_a_replica_heartbeat_out_of_shape_is_422(ns: TestClient, change: dict[str, Any]) -> None:
    body = {"broker_name": unique(), "replica_id": 0, "address": "10.0.0.1:10911", "replication": "sync", "epoch": 0,
            "log_end_offset": 0, **change}
    assert ns.post("/v1/brokers/replicas/heartbeat", json=body).status_code == 422
