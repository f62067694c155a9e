"""Topic and group management through the REST API, on SQLite and PostgreSQL: a topic never shrinks, reads never
create anything, deletions are refused while live clients remain, audited, and handed to brokers in order."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient
from nameserver_testkit import OPS, broker_heartbeat, client_heartbeat

pytestmark = pytest.mark.integration


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def put_topic(ns: TestClient, topic: str, queues: int, gray: int = 0) -> Any:
    return ns.put(f"/v1/topics/{topic}", json={"queue_nums": queues, "gray_queue_nums": gray}, headers=OPS)


def topics(ns: TestClient) -> dict[str, dict[str, Any]]:
    return {t["topic"]: t for t in ns.get("/v1/topics").json()}


def audit(ns: TestClient, **params: str) -> list[dict[str, Any]]:
    return list(ns.get("/v1/audit", params=params).json())


def beat(ns: TestClient, broker: str, applied: int, *reported: tuple[str, int, int]) -> dict[str, Any]:
    body = {"broker_name": broker, "address": "10.0.0.1:10911", "deletions_applied": applied,
            "topics": [{"topic": t, "queue_nums": n, "gray_queue_nums": g} for t, n, g in reported]}
    response = ns.post("/v1/brokers/heartbeat", json=body)
    assert response.status_code == 200, response.text
    return dict(response.json())


# -- topics -------------------------------------------------------------------------------


def test_shrinking_a_topic_is_409_naming_both_counts_and_changes_nothing(ns: TestClient) -> None:
    topic = unique("T")
    assert put_topic(ns, topic, 6, 2).status_code == 201
    refused = put_topic(ns, topic, 2)
    assert refused.status_code == 409, refused.text
    body = refused.json()
    assert "has 6 queues" in body["error"] and "cannot shrink to 2" in body["error"]
    assert body["detail"] == {"topic": topic, "queue_nums": 6, "requested_queue_nums": 2}
    assert (topics(ns)[topic]["queue_nums"], topics(ns)[topic]["gray_queue_nums"]) == (6, 2)
    assert [e["action"] for e in audit(ns, object_type="topic", object_id=topic)] == ["create"]
    assert put_topic(ns, topic, 8, 2).status_code == 200  # growing is fine
    assert topics(ns)[topic]["queue_nums"] == 8


def test_a_put_answers_which_live_brokers_serve_the_topic_with_its_layout(ns: TestClient) -> None:
    topic, serving, behind = unique("T"), unique("b"), unique("b")
    broker_heartbeat(ns, serving)
    broker_heartbeat(ns, behind)
    created = put_topic(ns, topic, 4, 2).json()
    assert (created["brokers_ready"], sorted(created["brokers_pending"])) == ([], sorted([serving, behind]))
    broker_heartbeat(ns, serving, (topic, 4, 2))
    broker_heartbeat(ns, behind, (topic, 2, 0))  # an older layout is not served yet
    again = put_topic(ns, topic, 4, 2).json()
    assert (again["brokers_ready"], again["brokers_pending"]) == ([serving], [behind])


def test_reads_of_unknown_groups_and_topics_are_404_and_create_nothing(ns: TestClient) -> None:
    group, topic = unique("NO_SUCH_GROUP"), unique("NO_SUCH_TOPIC")
    for path in (f"/v1/groups/{group}", f"/v1/groups/{group}/clients", f"/v1/groups/{group}/rules",
                 f"/v1/groups/{group}/cutovers", f"/v1/topics/{topic}/route"):
        response = ns.get(path)
        assert response.status_code == 404, path
        assert "unknown" in response.json()["error"]
    assert group not in {g["group"] for g in ns.get("/v1/groups").json()}
    assert topic not in topics(ns)


def test_deleting_a_topic_is_refused_while_live_clients_use_it_then_audited_and_gone(ns: TestClient) -> None:
    topic, other, group = unique("T"), unique("T"), unique("g")
    put_topic(ns, topic, 4)
    put_topic(ns, other, 4)
    client_heartbeat(ns, group, "c1", topics=[topic])
    client_heartbeat(ns, group, "p1", role="producer", topics=[other])
    refused = ns.delete(f"/v1/topics/{topic}", headers=OPS)
    assert refused.status_code == 409, refused.text
    assert "c1 (consumer of" in refused.json()["error"]
    assert refused.json()["detail"]["clients"] == [{"group": group, "client_id": "c1", "role": "consumer"}]
    assert topic in topics(ns)
    assert ns.delete(f"/v1/groups/{group}/clients/c1").status_code == 204  # the consumer stops
    assert ns.delete(f"/v1/topics/{topic}", params={"reason": "cleanup"}, headers=OPS).status_code == 204
    assert topic not in topics(ns) and other in topics(ns)
    assert ns.get(f"/v1/topics/{topic}/route").status_code == 404
    entry = audit(ns, object_type="topic", object_id=topic)[0]
    assert (entry["action"], entry["actor"], entry["reason"]) == ("delete", "ops", "cleanup")
    assert entry["before"]["queue_nums"] == 4
    assert ns.delete(f"/v1/topics/{topic}", headers=OPS).status_code == 404
    assert ns.delete(f"/v1/topics/{other}", headers={"Authorization": ""}).status_code == 401  # admin only


def test_brokers_get_deletions_in_order_and_a_topic_they_still_report_is_not_recorded_again(ns: TestClient) -> None:
    topic, broker = unique("T"), unique("b")
    put_topic(ns, topic, 4)
    first = beat(ns, broker, 0, (topic, 4, 0))
    applied = first["last_deletion_id"]
    assert ns.delete(f"/v1/topics/{topic}", headers=OPS).status_code == 204
    behind = beat(ns, broker, applied, (topic, 4, 0))  # not applied yet: still reports it
    assert [(d["kind"], d["name"]) for d in behind["deletions"]] == [("topic", topic)]
    assert behind["last_deletion_id"] > applied and behind["topics_version"] != first["topics_version"]
    assert topic not in topics(ns) and topic not in {t["topic"] for t in behind["topics"]}
    assert ns.get(f"/v1/topics/{topic}/route").status_code == 404
    caught_up = beat(ns, broker, behind["last_deletion_id"])
    assert caught_up["deletions"] == [] and caught_up["topics_version"] == behind["topics_version"]
    # Created again later (a retry topic for a new consumer, or by an operator), it is recorded as usual.
    beat(ns, broker, caught_up["last_deletion_id"], (topic, 4, 0))
    assert topic in topics(ns)
    assert {b["broker_name"] for b in ns.get(f"/v1/topics/{topic}/route").json()["brokers"]} == {broker}


def test_a_deleted_topic_can_be_created_again_with_another_layout(ns: TestClient) -> None:
    topic = unique("T")
    put_topic(ns, topic, 8)
    assert ns.delete(f"/v1/topics/{topic}", headers=OPS).status_code == 204
    assert put_topic(ns, topic, 2).status_code == 201
    assert topics(ns)[topic]["queue_nums"] == 2


# -- groups -------------------------------------------------------------------------------


def test_group_list_counts_live_clients_of_every_role(ns: TestClient) -> None:
    busy, idle = unique("g"), unique("g")
    client_heartbeat(ns, busy, "c1")
    client_heartbeat(ns, busy, "c1", role="producer")
    client_heartbeat(ns, busy, "c2")
    client_heartbeat(ns, idle, "c3")
    ns.delete(f"/v1/groups/{idle}/clients/c3")
    listed = {g["group"]: g for g in ns.get("/v1/groups").json()}
    assert (listed[busy]["live_clients"], listed[idle]["live_clients"]) == (3, 0)
    assert listed[busy]["gray_switch"] is True and listed[busy]["orphan_policy"] == "hold"


def test_deleting_a_group_is_refused_while_it_has_live_clients(ns: TestClient) -> None:
    group = unique("g")
    client_heartbeat(ns, group, "c1")
    refused = ns.delete(f"/v1/groups/{group}", headers=OPS)
    assert refused.status_code == 409, refused.text
    assert "c1 (consumer)" in refused.json()["error"]
    assert refused.json()["detail"]["clients"] == [{"client_id": "c1", "role": "consumer"}]
    assert ns.get(f"/v1/groups/{group}").status_code == 200


def test_deleting_a_group_is_refused_while_a_cutover_runs(ns: TestClient) -> None:
    group = unique("g")
    ns.put(f"/v1/groups/{group}/switch", json={"enabled": True}, headers=OPS)
    started = ns.post(f"/v1/groups/{group}/cutovers", json={"kind": "promote"}, headers=OPS).json()
    refused = ns.delete(f"/v1/groups/{group}", headers=OPS)
    assert refused.status_code == 409 and refused.json()["detail"]["id"] == started["id"]
    ns.patch(f"/v1/cutovers/{started['id']}", json={"state": "SUCCEEDED"}, headers=OPS)
    assert ns.delete(f"/v1/groups/{group}", headers=OPS).status_code == 204


def test_deleting_a_group_removes_its_rules_records_and_retry_topic_and_tells_brokers(ns: TestClient) -> None:
    group, broker, keep = unique("g"), unique("b"), unique("T")
    retry, dlq = f"%RETRY%{group}", f"%DLQ%{group}"
    put_topic(ns, keep, 4)
    client_heartbeat(ns, group, "c1")  # a mistyped group, created by a consumer's first heartbeat
    applied = beat(ns, broker, 0, (retry, 4, 2), (keep, 4, 0))["last_deletion_id"]
    ns.post(f"/v1/groups/{group}/rules", json={"selector": {"v": "2"}, "gray": True}, headers=OPS)
    assert retry in topics(ns)
    assert ns.delete(f"/v1/groups/{group}/clients/c1").status_code == 204
    assert ns.delete(f"/v1/groups/{group}", params={"reason": "typo"}, headers=OPS).status_code == 204
    assert ns.get(f"/v1/groups/{group}").status_code == 404
    assert group not in {g["group"] for g in ns.get("/v1/groups").json()}
    assert retry not in topics(ns) and keep in topics(ns)
    answer = beat(ns, broker, applied, (retry, 4, 2), (keep, 4, 0))
    assert {(d["kind"], d["name"]) for d in answer["deletions"]} == {("topic", retry), ("topic", dlq), ("group", group)}
    assert retry not in topics(ns)
    entry = audit(ns, group=group, object_type="group")[0]
    assert (entry["action"], entry["actor"], entry["reason"]) == ("delete", "ops", "typo")
    assert entry["before"]["rules"][0]["selector"] == {"v": "2"}
    assert ns.delete(f"/v1/groups/{group}", headers=OPS).status_code == 404
    # A client of the same name later starts the group afresh.
    assert client_heartbeat(ns, group, "c9")["orphan_policy"] == "hold"
    assert ns.get(f"/v1/groups/{group}/rules").json() == []
