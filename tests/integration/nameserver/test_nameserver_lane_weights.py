"""Weights per lane on the name server (docs/lanes.md), on SQLite and PostgreSQL: stored per (group, lane), listed
with the group's lanes, carried by heartbeat answers (so consumers apply them) and waking watches, the sum of a
group's weights at most 100, audited as a change of the lane; migration 0017 keeps every lane record."""

from __future__ import annotations

import concurrent.futures
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from nameserver_testkit import client_heartbeat
from test_nameserver_migration_columns import BACKENDS, database_at

from graymq.migrations.schema import downgrade, upgrade

pytestmark = [pytest.mark.integration, pytest.mark.name_server(client_expiry_seconds=600)]
T = "T_WEIGHTS"


@pytest.fixture
def ns(ns: TestClient) -> TestClient:
    """The name server with topic ``T`` of three lane slots."""
    assert ns.put(f"/v1/topics/{T}", json={"queue_nums": 8, "gray_queue_nums": 2, "lane_slots": 3}).status_code == 201
    return ns


def put_lane_weight(ns: TestClient, group: str, lane: str, weight: Any, reason: str | None = None) -> Any:
    return ns.put(f"/v1/groups/{group}/lanes/{lane}/weight", json={"weight": weight, "reason": reason})


def test_a_lane_weight_is_stored_listed_and_carried_by_heartbeat_answers(ns: TestClient) -> None:
    client_heartbeat(ns, "G", "c3", topics=[T], declared_lane="v3")
    before = client_heartbeat(ns, "G", "c3", topics=[T], declared_lane="v3")
    assert before["lanes"] == {"v3": {"orphan_policy": "hold", "taking_part": True}}  # no weight: as before
    set_v3 = put_lane_weight(ns, "G", "v3", 30, "canary v3")
    assert set_v3.status_code == 200, set_v3.text
    assert (set_v3.json()["lane"], set_v3.json()["weight"], set_v3.json()["clients"]) == ("v3", 30, ["c3 (consumer)"])
    assert put_lane_weight(ns, "G", "v2", 20).json()["weight"] == 20  # a lane the group never met
    answer = client_heartbeat(ns, "G", "c3", topics=[T], declared_lane="v3")
    assert answer["lanes"]["v3"] == {"orphan_policy": "hold", "taking_part": True, "weight": 30}
    assert answer["lanes"]["v2"]["weight"] == 20 and answer["gray_weight"] == 0
    assert {v["lane"]: v.get("weight") for v in ns.get("/v1/groups/G/lanes").json()} == {"v2": 20, "v3": 30}
    assert put_lane_weight(ns, "G", "gray", 10).json()["weight"] == 10  # gray's is the group's weight
    assert ns.get("/v1/groups/G").json()["gray_weight"] == 10
    entries = [e for e in ns.get("/v1/audit", params={"group": "G"}).json() if e["action"] == "set_weight"]
    assert [(e["object_type"], e["object_id"], e["before"], e["after"]) for e in entries][-1:] == [
        ("lane", "v3", {"weight": 0}, {"weight": 30})]  # newest first: v3's is the oldest of the three
    assert entries[-1]["reason"] == "canary v3"
    assert put_lane_weight(ns, "G", "v3", 0).status_code == 200
    assert "weight" not in client_heartbeat(ns, "G", "c3", topics=[T], declared_lane="v3")["lanes"]["v3"]


def test_the_weights_of_a_group_add_up_to_at_most_100(ns: TestClient) -> None:
    assert ns.put("/v1/groups/G/weight", json={"weight": 60}).status_code == 200
    assert put_lane_weight(ns, "G", "v2", 30).status_code == 200
    refused = put_lane_weight(ns, "G", "v3", 20)
    assert refused.status_code == 409
    assert refused.json()["detail"] == ("the weights of G's lanes would add up to 110% (gray 60%, v2 30%, v3 20%): "
                                        "at most 100%")
    gray_refused = ns.put("/v1/groups/G/weight", json={"weight": 80})
    assert gray_refused.status_code == 409 and "(gray 80%, v2 30%)" in gray_refused.json()["detail"]
    assert put_lane_weight(ns, "G", "v3", 10).status_code == 200  # exactly 100
    assert {v["lane"]: v.get("weight", 0) for v in ns.get("/v1/groups/G/lanes").json()} == {
        "gray": 60, "v2": 30, "v3": 10}
    for bad in (101, -1, "20", None):
        assert put_lane_weight(ns, "G", "v3", bad).status_code == 422
    assert put_lane_weight(ns, "G", "bad lane", 10).status_code == 422


def test_a_lane_weight_change_wakes_the_watch_of_a_lane_consumer(ns: TestClient) -> None:
    answer = client_heartbeat(ns, "G", "c3", topics=[T], declared_lane="v3")
    known = {key: answer[key] for key in ("desired_gray", "gray_switch", "orphan_policy", "gray_weight",
                                          "desired_lane", "lanes")}
    watch = {"group": "G", "client_id": "c3", "role": "consumer", "known": known, "timeout_s": 30}
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        woken = pool.submit(ns.post, "/v1/clients/watch", json=watch)
        assert put_lane_weight(ns, "G", "v3", 40).status_code == 200
        assert woken.result(25).json()["lanes"]["v3"]["weight"] == 40


@pytest.mark.parametrize("backend", BACKENDS)
def test_0017_adds_the_lane_weight_keeping_every_lane_record(backend: str, tmp_path: Path, postgres: Any) -> None:
    with database_at(backend, "0016", tmp_path, postgres) as (url, engine):
        with engine.begin() as db:
            db.exec_driver_sql("INSERT INTO groups (id, name, gray_switch, orphan_policy, created_at, updated_at) "
                               "VALUES (1, 'g', true, 'hold', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)")
            db.exec_driver_sql("INSERT INTO group_lanes (group_id, lane, orphan_policy) VALUES (1, 'v3', 'adopt')")
        upgrade(url, "0017")
        with engine.begin() as db:
            assert db.exec_driver_sql("SELECT lane, orphan_policy, weight FROM group_lanes").all() == [
                ("v3", "adopt", 0)]
            db.exec_driver_sql("UPDATE group_lanes SET weight = 25")
        with pytest.raises(Exception, match="(?i)constraint|check"), engine.begin() as db:
            db.exec_driver_sql("UPDATE group_lanes SET weight = 101")
        downgrade(url, "0016")
        with engine.begin() as db:
            assert db.exec_driver_sql("SELECT lane, orphan_policy FROM group_lanes").all() == [("v3", "adopt")]
