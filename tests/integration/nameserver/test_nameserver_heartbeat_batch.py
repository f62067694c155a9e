"""``POST /v1/clients/heartbeats`` on SQLite and PostgreSQL: several clients' heartbeats in one call, each stored and
answered as a single heartbeat is; one beyond the caller's rights or naming another principal's live client fails
alone, in its place, and the others are stored."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from nameserver_testkit import OPS

pytestmark = [pytest.mark.integration, pytest.mark.name_server(headers=None, client_expiry_seconds=600)]


def principal(api: TestClient, name: str, *groups: str) -> dict[str, str]:
    added = api.post("/v1/principals", json={"name": name, "consume": list(groups)}, headers=OPS)
    assert added.status_code == 201, added.text
    return {"Authorization": f"Bearer {added.json()['token']}"}


def beat(group: str, client_id: str, **fields: Any) -> dict[str, Any]:
    return {"group": group, "client_id": client_id, "role": "consumer", "labels": {"protocol": "rocketmq5"}, **fields}


def test_a_batch_of_heartbeats_is_answered_one_by_one_and_a_refused_one_fails_alone(ns: TestClient) -> None:
    orders = principal(ns, "orders", "GID_ORDERS")
    other = principal(ns, "other", "GID_ORDERS")
    assert ns.post("/v1/clients/heartbeat", json=beat("GID_ORDERS", "theirs"), headers=other).status_code == 200
    assert ns.post("/v1/clients/heartbeat", json=beat("GID_ORDERS", "mine-1"), headers=orders).status_code == 200
    assert ns.put("/v1/groups/GID_ORDERS/clients/mine-1/flag", json={"gray": True}, headers=OPS).status_code < 300

    batch = [beat("GID_ORDERS", "mine-1", topics=["ORDER_PAID"]), beat("GID_PAYMENTS", "mine-1"),
             beat("GID_ORDERS", "theirs"), beat("GID_ORDERS", "mine-2", gray=False, state="NORMAL")]
    answer = ns.post("/v1/clients/heartbeats", json={"heartbeats": batch}, headers=orders)
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert [r["status_code"] for r in results] == [200, 403, 403, 200]
    assert results[0]["answer"]["client_id"] == "mine-1" and results[0]["answer"]["desired_gray"] is True
    assert results[3]["answer"]["client_id"] == "mine-2" and results[3]["answer"]["desired_gray"] is False
    assert results[1]["error"] == "FORBIDDEN" and "consume group GID_PAYMENTS" in results[1]["detail"]
    assert results[2]["error"] == "FORBIDDEN"

    single = ns.post("/v1/clients/heartbeat", json=beat("GID_ORDERS", "mine-1", topics=["ORDER_PAID"]), headers=orders)
    assert single.json() == results[0]["answer"]
    listed = ns.get("/v1/groups/GID_ORDERS/clients", headers=OPS).json()
    rows = listed["clients"] if isinstance(listed, dict) else listed
    assert {c["client_id"] for c in rows} >= {"mine-1", "mine-2", "theirs"}


def test_a_batch_is_bounded_and_never_empty(ns: TestClient) -> None:
    orders = principal(ns, "orders", "GID_ORDERS")
    assert ns.post("/v1/clients/heartbeats", json={"heartbeats": []}, headers=orders).status_code == 422
    many = [beat("GID_ORDERS", f"c-{i}") for i in range(501)]
    assert ns.post("/v1/clients/heartbeats", json={"heartbeats": many}, headers=orders).status_code in (413, 422)
    assert ns.post("/v1/clients/heartbeats", json={"heartbeats": many[:1]}).status_code == 401


def test_a_batched_watch_answers_when_one_of_its_clients_changes_and_a_refused_one_waits_with_the_others(
        ns: TestClient) -> None:
    orders = principal(ns, "orders", "GID_ORDERS")
    batch = [beat("GID_ORDERS", f"mine-{i}") for i in range(3)]
    known = {r["answer"]["client_id"]: r["answer"] for r in
             ns.post("/v1/clients/heartbeats", json={"heartbeats": batch}, headers=orders).json()["results"]}
    watches = [{"group": "GID_ORDERS", "client_id": c, "role": "consumer",
                "known": {k: known[c][k] for k in ("desired_gray", "gray_switch", "orphan_policy")}} for c in known]
    watches.append({"group": "GID_PAYMENTS", "client_id": "mine-0", "role": "consumer"})  # beyond the rights

    quiet = ns.post("/v1/clients/watches", json={"watches": watches, "timeout_s": 0.5}, headers=orders)
    assert quiet.status_code == 200, quiet.text
    assert [r["status_code"] for r in quiet.json()["results"]] == [200, 200, 200, 403]
    assert ns.put("/v1/groups/GID_ORDERS/clients/mine-1/flag", json={"gray": True}, headers=OPS).status_code < 300
    changed = ns.post("/v1/clients/watches", json={"watches": watches, "timeout_s": 30}, headers=orders).json()
    assert [r["answer"]["desired_gray"] for r in changed["results"][:3]] == [False, True, False]
