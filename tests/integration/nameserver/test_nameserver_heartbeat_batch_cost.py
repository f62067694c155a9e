"""A batch of client heartbeats (``POST /v1/clients/heartbeats``) costs the name server per batch, not per client, on
SQLite and PostgreSQL: unchanged reports cost a bounded number of statements whatever the batch's size, and each
client of a batch is still stored, answered and expired as a heartbeat of its own was."""

from __future__ import annotations

import time
from typing import Any

import pytest
from fastapi.testclient import TestClient
from nameserver_testkit import OPS, broker_heartbeat
from sqlalchemy import Engine
from test_nameserver_statements import recorded_statements

GROUPS = ("GID_ORDERS", "GID_PAYMENTS")
EXPIRY_S = 3
pytestmark = [pytest.mark.integration, pytest.mark.name_server(health_sample_seconds=60, client_expiry_seconds=600)]


def principal(api: TestClient) -> dict[str, str]:
    added = api.post("/v1/principals", json={"name": "orders", "consume": list(GROUPS)}, headers=OPS)
    assert added.status_code == 201, added.text
    return {"Authorization": f"Bearer {added.json()['token']}"}


def beats(count: int, **fields: Any) -> list[dict[str, Any]]:
    """``count`` consumers over both groups, on a topic with gray queues, half of them labelled v2."""
    return [{"group": GROUPS[i % 2], "client_id": f"c-{i:03d}", "role": "consumer", "topics": ["ORDER_PAID"],
             "labels": {"version": "v2" if i % 4 < 2 else "v1"}, "queues": [f"ORDER_PAID@b:{i % 8}"], **fields}
            for i in range(count)]


def post(api: TestClient, batch: list[dict[str, Any]], headers: dict[str, str]) -> list[dict[str, Any]]:
    response = api.post("/v1/clients/heartbeats", json={"heartbeats": batch}, headers=headers)
    assert response.status_code == 200, response.text
    results: list[dict[str, Any]] = response.json()["results"]
    assert all(r["status_code"] == 200 for r in results), results
    return results


def listed(api: TestClient, group: str) -> dict[str, dict[str, Any]]:
    return {c["client_id"]: c for c in api.get(f"/v1/groups/{group}/clients", headers=OPS).json()["clients"]}


def test_a_batch_of_unchanged_heartbeats_costs_statements_independent_of_its_size(ns: TestClient) -> None:
    token = principal(ns)
    broker_heartbeat(ns, "broker-a", ("ORDER_PAID", 8, 2))
    for group in GROUPS:
        assert ns.post(f"/v1/groups/{group}/rules", json={"selector": {"version": "v2"}, "gray": True},
                       headers=OPS).status_code == 201
    first = post(ns, beats(100), token)
    engine: Engine = ns.app.state.engine  # type: ignore[attr-defined]

    with recorded_statements(engine) as hundred:
        again = post(ns, beats(100), token)
    with recorded_statements(engine) as ten:
        post(ns, beats(10), token)

    assert again == first
    assert [r["answer"]["desired_gray"] for r in again[:4]] == [True, True, False, False]
    assert len(hundred) == len(ten), (hundred, ten)
    assert len(hundred) <= 12, hundred


def test_a_batch_stores_each_changed_report_and_answers_it_as_a_single_heartbeat(ns: TestClient) -> None:
    token = principal(ns)
    assert ns.post("/v1/groups/GID_ORDERS/rules", json={"selector": {"version": "v3"}, "gray": True},
                   headers=OPS).status_code == 201
    post(ns, beats(20), token)
    changed = beats(20)
    for beat in changed[:10:2]:  # five consumers of GID_ORDERS move to v3 and report other queues
        beat["labels"], beat["queues"] = {"version": "v3"}, ["ORDER_PAID@b:7"]

    results = post(ns, changed, token)

    assert [r["answer"]["desired_gray"] for r in results[:12]] == [True, False] * 5 + [False, False]
    clients = listed(ns, "GID_ORDERS")
    assert {clients[f"c-{i:03d}"]["labels"]["version"] for i in range(0, 10, 2)} == {"v3"}
    assert {clients[f"c-{i:03d}"]["queues"][0] for i in range(0, 10, 2)} == {"ORDER_PAID@b:7"}
    assert clients["c-010"]["labels"]["version"] == "v1"
    single = ns.post("/v1/clients/heartbeat", json=changed[0], headers=token)
    assert single.json() == results[0]["answer"]


@pytest.mark.name_server(client_expiry_seconds=EXPIRY_S, client_stale_seconds=1)
def test_clients_a_batch_keeps_beating_stay_while_those_it_dropped_expire_and_one_stopped_leaves_at_once(
        ns: TestClient) -> None:
    token = principal(ns)
    batch = beats(8)
    post(ns, batch, token)
    kept = [beat for beat in batch if beat["client_id"] != "c-006"]  # c-006 (GID_ORDERS) is no longer sent

    deadline = time.monotonic() + 10 * EXPIRY_S
    while "c-006" in listed(ns, "GID_ORDERS"):
        assert time.monotonic() < deadline, "a client no batch carries any more did not expire"
        post(ns, kept, token)
        assert set(listed(ns, "GID_ORDERS")) >= {"c-000", "c-002", "c-004"}
        time.sleep(0.2)
    assert set(listed(ns, "GID_PAYMENTS")) == {"c-001", "c-003", "c-005", "c-007"}

    stopped = ns.delete("/v1/groups/GID_PAYMENTS/clients/c-003", params={"role": "consumer"}, headers=token)
    assert stopped.status_code == 204
    assert set(listed(ns, "GID_PAYMENTS")) == {"c-001", "c-005", "c-007"}
