"""What a rollout needs from the name server, on SQLite and PostgreSQL: consumers report their health per side in
heartbeats (checked strictly, stored, listed, added up in /metrics); a group's gray side can be retired (admins only,
audited, shown in every view and heartbeat answer, waking watches that know it); cutover records hold rollouts,
whose mode says what follows the last step."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient
from nameserver_testkit import client_heartbeat

from tests.support.metrics import parse_metrics

pytestmark = pytest.mark.integration


def health(gray_consumed: int = 0, gray_failed: int = 0, normal_consumed: int = 0, p99: float = 0.0) -> dict[str, Any]:
    return {"gray": {"consumed": gray_consumed, "failed": gray_failed, "sent_back": gray_failed, "dead_lettered": 0,
                     "p50_ms": p99 / 2, "p99_ms": p99},
            "normal": {"consumed": normal_consumed, "failed": 0, "sent_back": 0, "dead_lettered": 0, "p50_ms": 0.0,
                       "p99_ms": 0.0}}


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def test_reported_health_is_stored_listed_and_added_up_per_group_and_side_in_metrics(ns: TestClient) -> None:
    group = unique("g")
    client_heartbeat(ns, group, "v2", gray=True, state="GRAY", health=health(100, 50, p99=12.5))
    client_heartbeat(ns, group, "v1", health=health(normal_consumed=400))
    client_heartbeat(ns, group, "p1", role="producer")
    listed = {c["client_id"]: c["health"] for c in ns.get(f"/v1/groups/{group}/clients").json()["clients"]}
    assert listed == {"v2": health(100, 50, p99=12.5), "v1": health(normal_consumed=400), "p1": None}
    metrics = ns.get("/metrics").text
    assert f'graymq_consumer_messages_total{{group="{group}",lane="gray",outcome="failed",side="gray"}} 50.0' in metrics
    assert (f'graymq_consumer_messages_total{{group="{group}",lane="base",outcome="consumed",side="normal"}} 400.0'
            in metrics)
    assert f'graymq_consumer_latency_ms{{group="{group}",lane="gray",quantile="0.99",side="gray"}} 12.5' in metrics


def test_a_consumer_reports_its_gray_side_per_lane_and_metrics_add_it_up_per_lane(ns: TestClient) -> None:
    group = unique("g")
    v3 = {**health(30, 6, p99=8.0), "lanes": {"v3": health(30, 6, p99=8.0)["gray"]}}
    client_heartbeat(ns, group, "v3a", gray=True, state="GRAY", health=v3)
    client_heartbeat(ns, group, "v3b", gray=True, state="GRAY", health={**health(10, 1), "lanes": {
        "v3": health(4, 1)["gray"], "gray": health(6)["gray"]}})
    client_heartbeat(ns, group, "old", gray=True, state="GRAY", health=health(5, 2))  # a report without lanes
    listed = {c["client_id"]: c["health"] for c in ns.get(f"/v1/groups/{group}/clients").json()["clients"]}
    assert listed["v3a"] == v3 and "lanes" not in listed["old"]
    metrics = parse_metrics(ns.get("/metrics").text)

    def messages(lane: str, outcome: str) -> float | None:
        side = "normal" if lane == "base" else "gray"
        return metrics.value("graymq_consumer_messages_total", group=group, side=side, lane=lane, outcome=outcome)

    assert (messages("v3", "consumed"), messages("v3", "failed")) == (34, 7)
    assert (messages("gray", "consumed"), messages("gray", "failed")) == (11, 2)
    assert messages("base", "consumed") == 0
    assert metrics.value("graymq_consumer_latency_ms", group=group, side="gray", lane="v3", quantile="0.99") == 8.0
    refused = ns.post("/v1/clients/heartbeat", json={"group": group, "client_id": "c9", "role": "consumer",
                                                       "health": {"lanes": {"base": {}}}})
    assert refused.status_code == 422, refused.text


@pytest.mark.parametrize("bad", [
    {"gray": {"consumed": -1}},
    {"gray": {"consumed": 1.5}},
    {"gray": {"p99_ms": float("inf")}},
    {"blue": {}},
    {"gray": {"consumed": 1, "stolen": 2}},
    "healthy",
])
def test_a_health_report_out_of_shape_is_422_and_stores_nothing(ns: TestClient, bad: Any) -> None:
    group = unique("g")
    client_heartbeat(ns, group, "c1", health=health(7))
    refused = ns.post("/v1/clients/heartbeat", content=_json({"group": group, "client_id": "c1", "role": "consumer",
                                                              "health": bad}),
                      headers={"Content-Type": "application/json"})
    assert refused.status_code == 422, refused.text
    assert refused.json()["detail"][0]["loc"][:2] == ["body", "health"]
    [client] = ns.get(f"/v1/groups/{group}/clients").json()["clients"]
    assert client["health"]["gray"]["consumed"] == 7


def _json(body: Any) -> str:
    import json

    return json.dumps(body, allow_nan=True)


def test_retiring_the_gray_side_is_shown_everywhere_audited_and_admitted_as_a_client_state(ns: TestClient) -> None:
    group = unique("g")
    beat = client_heartbeat(ns, group, "v2", gray=True, state="GRAY")
    assert beat["gray_retired"] is False
    answer = ns.put(f"/v1/groups/{group}/retired", json={"retired": True, "reason": "v2 fails"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["gray_retired"] is True
    assert ns.get(f"/v1/groups/{group}").json()["gray_retired"] is True
    assert ns.get(f"/v1/groups/{group}/clients").json()["gray_retired"] is True
    beat = client_heartbeat(ns, group, "v2", gray=True, state="RETIRED", queues=[])
    assert (beat["gray_retired"], beat["state"]) == (True, "RETIRED")
    [entry] = ns.get("/v1/audit", params={"group": group}).json()
    assert (entry["action"], entry["before"], entry["after"], entry["reason"]) == (
        "set_retired", {"gray_retired": False}, {"gray_retired": True}, "v2 fails")
    watch = ns.post("/v1/clients/watch", json={"group": group, "client_id": "v2", "role": "consumer", "timeout_s": 0,
                                               "known": {"desired_gray": True, "gray_switch": True,
                                                         "orphan_policy": "hold", "gray_retired": False}})
    assert watch.json()["gray_retired"] is True  # a stale view is answered at once
    assert ns.put(f"/v1/groups/{group}/retired", json={"retired": "yes"}).status_code == 422


def test_only_admins_retire_a_gray_side(ns: TestClient) -> None:
    group = unique("g")
    added = ns.post("/v1/principals", json={"name": unique("app"), "consume": [group]})
    consumer = {"Authorization": f"Bearer {added.json()['token']}"}
    assert ns.put(f"/v1/groups/{group}/retired", json={"retired": True}, headers=consumer).status_code == 403


@pytest.mark.parametrize("kind, mode, status", [
    ("rollout", "promote", 201), ("rollout", "hold", 201), ("rollout", "drain", 422), ("promote", "hold", 422),
    ("rollback", "adopt", 201),
])
def test_a_rollout_record_takes_promote_or_hold_and_the_others_drain_or_adopt(
    ns: TestClient, kind: str, mode: str, status: int
) -> None:
    group = unique("g")
    client_heartbeat(ns, group, "c1")
    answer = ns.post(f"/v1/groups/{group}/cutovers", json={"kind": kind, "mode": mode})
    assert answer.status_code == status, answer.text
    if status == 201:
        assert (answer.json()["kind"], answer.json()["mode"]) == (kind, mode)
