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


def test_a_batched_watch_woken_by_one_group_reads_that_group_again_not_the_others(
        ns: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process's watches span many groups: a change of one re-reads that group's clients only (the others'
    views, unchanged since the watch read them, are answered as read), and a watch that times out reads nothing
    again."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    from graymq.nameserver.services.clients import ClientService

    reread: list[str] = []
    group_views = ClientService.group_views
    monkeypatch.setattr(ClientService, "group_views",
                        lambda self, group: reread.append(group) or group_views(self, group))
    batch = [beat("GID_A", "a1"), beat("GID_B", "b1")]
    full_before = full_beats(ns)
    results = ns.post("/v1/clients/heartbeats", json={"heartbeats": batch}, headers=OPS).json()["results"]
    answers = {b["group"]: r["answer"] for b, r in zip(batch, results, strict=True)}
    assert full_beats(ns) - full_before == 2  # counted by kind for operators
    watches = [{"group": g, "client_id": answers[g]["client_id"], "role": "consumer",
                "known": {k: answers[g][k] for k in ("desired_gray", "gray_switch", "orphan_policy")}}
               for g in ("GID_A", "GID_B")]
    quiet = ns.post("/v1/clients/watches", json={"watches": watches, "timeout_s": 0.3}, headers=OPS)
    assert quiet.status_code == 200 and reread == []  # timed out: nothing read again
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(ns.post, "/v1/clients/watches", json={"watches": watches, "timeout_s": 30},
                              headers=OPS)
        deadline = time.monotonic() + 10
        while not any(line.startswith("graymq_nameserver_open_watches 1.0") for line in
                      ns.get("/metrics").text.splitlines()) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ns.put("/v1/groups/GID_A/clients/a1/flag", json={"gray": True}, headers=OPS).status_code < 300
        woken = pending.result(30)
    assert woken.status_code == 200, woken.text
    a, b = (r["answer"] for r in woken.json()["results"])
    assert (a["desired_gray"], b["desired_gray"], b["client_id"]) == (True, False, "b1")
    assert reread == ["GID_A"]


def full_beats(ns: TestClient) -> float:
    """The full heartbeats batches carried so far (``graymq_nameserver_client_beats_total{kind="full"}``)."""
    prefix = 'graymq_nameserver_client_beats_total{kind="full"} '
    return sum(float(line[len(prefix):]) for line in ns.get("/metrics").text.splitlines() if line.startswith(prefix))
