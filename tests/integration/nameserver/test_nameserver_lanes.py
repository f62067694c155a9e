"""Lanes on the name server (docs/lanes.md), on SQLite and PostgreSQL: lane slots of topics (taken by a lane's first
client, refused in one line when full, freed unless in use), the desired lane's precedence, taking part, orphan
policies per lane, and what brokers, routes, heartbeats and watches carry."""

from __future__ import annotations

import concurrent.futures
from typing import Any

import pytest
from fastapi.testclient import TestClient
from nameserver_testkit import client_heartbeat

pytestmark = [pytest.mark.integration, pytest.mark.name_server(client_expiry_seconds=600)]
T = "T_LANES"


def register_broker(ns: TestClient) -> None:
    registered = ns.post("/v1/brokers/heartbeat", json={"broker_name": "b1", "address": "10.0.0.1:10911"})
    assert registered.status_code == 200, registered.text


def put_topic(ns: TestClient, topic: str = T, queues: int = 8, gray: int = 2, lanes: int = 1) -> Any:
    return ns.put(f"/v1/topics/{topic}", json={"queue_nums": queues, "gray_queue_nums": gray, "lane_slots": lanes})


def beat(ns: TestClient, group: str, client_id: str, **fields: Any) -> Any:
    return ns.post("/v1/clients/heartbeat", json={"group": group, "client_id": client_id, "role": "consumer",
                                                  "topics": [T], **fields})


def error_line(response: Any) -> str:
    body = response.json()
    return f"{body['error']}: {body['detail']}"


def test_a_topic_grows_its_lane_slots_and_never_shrinks_them(ns: TestClient) -> None:
    assert put_topic(ns).json().get("lane_slots", 1) == 1
    grown = put_topic(ns, lanes=3)
    assert grown.status_code == 200 and grown.json()["lane_slots"] == 3 and grown.json()["queue_nums"] == 8
    shrunk = put_topic(ns, lanes=2)
    assert shrunk.status_code == 409
    assert error_line(shrunk) == ("CONFLICT: topic T_LANES has 3 lane slots and cannot shrink to 2 (lanes hold their "
                                  "queues): keep 3 or more")
    moved = put_topic(ns, queues=10, lanes=3)
    assert moved.status_code == 409 and "each slot's queues would move" in error_line(moved)
    for bad in ({"queue_nums": 8, "gray_queue_nums": 0, "lane_slots": 2},
                {"queue_nums": 1000, "gray_queue_nums": 2, "lane_slots": 20},
                {"queue_nums": 8, "gray_queue_nums": 2, "lane_slots": 0}):
        refused = ns.put("/v1/topics/T_BAD", json=bad)
        assert refused.status_code == 422, refused.text
        assert len(refused.json()["detail"]) == 1
    entries = ns.get("/v1/audit", params={"limit": 5}).json()
    assert [(e["object_id"], e["after"].get("lane_slots")) for e in entries if e["object_type"] == "topic"][:1] == [
        (T, 3)]


def test_brokers_are_told_the_total_queue_count_and_report_lane_slots_back_into_routes(ns: TestClient) -> None:
    put_topic(ns, lanes=3)
    answer = ns.post("/v1/brokers/heartbeat", json={"broker_name": "b1", "address": "10.0.0.1:10911", "topics": []})
    [pushed] = [t for t in answer.json()["topics"] if t["topic"] == T]
    assert pushed == {"topic": T, "queue_nums": 12, "gray_queue_nums": 2, "perm": 6, "lane_slots": 3}
    reported = ns.post("/v1/brokers/heartbeat", json={"broker_name": "b1", "address": "10.0.0.1:10911", "topics": [
        pushed, {"topic": "T_BY_BROKER", "queue_nums": 10, "gray_queue_nums": 2, "lane_slots": 2}]})
    assert reported.status_code == 200, reported.text
    route = ns.get(f"/v1/topics/{T}/route").json()
    [broker] = route["brokers"]
    assert (route["queue_nums"], broker["queue_nums"], broker["lane_slots"], route["lanes"]) == (12, 12, 3, {})
    assert put_topic(ns, lanes=3).json()["brokers_ready"] == ["b1"]  # it serves the configured layout
    [by_broker] = [t for t in ns.get("/v1/topics").json() if t["topic"] == "T_BY_BROKER"]
    assert (by_broker["queue_nums"], by_broker["lane_slots"]) == (8, 2)  # recorded as configured: its base count


def test_lanes_take_slots_with_their_first_client_and_a_full_topic_refuses_the_next_in_one_line(
    ns: TestClient,
) -> None:
    put_topic(ns, lanes=2)
    register_broker(ns)
    ns.post("/v1/groups/G/rules", json={"selector": {"version": "v2"}, "gray": True, "lane": "v2"})
    gray = client_heartbeat(ns, "G", "c-gray", topics=[T], declared_gray=True)
    v2 = client_heartbeat(ns, "G", "c-v2", topics=[T], labels={"version": "v2"})
    base = client_heartbeat(ns, "G", "c-base", topics=[T])
    assert (gray["desired_lane"], gray["desired_gray"], v2["desired_lane"], v2["desired_gray"]) == (
        "gray", True, "v2", True)
    assert (base["desired_lane"], base["desired_gray"]) == (None, False)
    assert base["topics"][T] == {"queue_nums": 10, "gray_queue_nums": 2, "lane_slots": 2, "lanes": {"gray": 0,
                                                                                                  "v2": 1}}
    assert ns.get(f"/v1/topics/{T}/route").json()["lanes"] == {"gray": 0, "v2": 1}
    refused = beat(ns, "G", "c-v3", declared_lane="v3")
    line = ("CONFLICT: topic T_LANES has no free lane slot (2 of 2 held by gray, v2): grow it (graymq topic update "
            "T_LANES --lanes 3) or end a lane")
    assert refused.status_code == 409 and error_line(refused) == line
    clients = {c["client_id"] for c in ns.get("/v1/groups/G/clients").json()["clients"]}
    assert clients == {"c-gray", "c-v2", "c-base"}  # refused at its first heartbeat: not registered
    ns.post("/v1/groups/G/rules", json={"selector": {"version": "v3"}, "gray": True, "lane": "v3"})
    moved = beat(ns, "G", "c-base", labels={"version": "v3"})
    assert moved.status_code == 409 and error_line(moved) == line
    kept = {c["client_id"]: c for c in ns.get("/v1/groups/G/clients").json()["clients"]}
    assert kept["c-base"]["labels"] == {"version": "v3"}  # registered before: keeps its (renewed) row
    assert kept["c-base"]["desired_lane"] == "v3"
    put_topic(ns, lanes=3)
    assert beat(ns, "G", "c-base", labels={"version": "v3"}).json()["topics"][T]["lanes"] == {
        "gray": 0, "v2": 1, "v3": 2}


def test_a_gray_client_on_a_topic_without_lanes_reads_todays_answer_with_its_lane_added(ns: TestClient) -> None:
    put_topic(ns)
    answer = client_heartbeat(ns, "G", "c1", topics=[T], gray=True, state="GRAY", declared_gray=True)
    assert answer["topics"][T] == {"queue_nums": 8, "gray_queue_nums": 2, "lane_slots": 1, "lanes": {"gray": 0}}
    assert (answer["desired_gray"], answer["desired_lane"], answer["orphan_policy"]) == (True, "gray", "hold")
    assert answer["lanes"] == {"gray": {"orphan_policy": "hold", "taking_part": True}}
    assert client_heartbeat(ns, "G", "c2", topics=["T_UNKNOWN"])["topics"] == {}


def test_precedence_flag_then_group_rule_then_all_groups_rule_then_declared(ns: TestClient) -> None:
    put_topic(ns, lanes=4)
    labels = {"host": "orders-v3-1"}
    assert client_heartbeat(ns, "G", "c1", topics=[T], labels=labels, declared_lane="v5")["desired_lane"] == "v5"
    all_groups = ns.post("/v1/rules", json={"selector": {"host": "orders-v3-*"}, "gray": True, "lane": "v3"})
    assert all_groups.status_code == 201 and all_groups.json()["lane"] == "v3"
    assert client_heartbeat(ns, "G", "c1", topics=[T], labels=labels, declared_lane="v5")["desired_lane"] == "v3"
    ns.post("/v1/groups/G/rules", json={"selector": {"host": "orders-*"}, "gray": True, "lane": "v2"})
    assert client_heartbeat(ns, "G", "c1", topics=[T], labels=labels, declared_lane="v5")["desired_lane"] == "v2"
    flag = ns.put("/v1/groups/G/clients/c1/flag", json={"gray": True, "lane": "v4"})
    assert flag.status_code == 200 and flag.json()["explicit_lane"] == "v4"
    view = client_heartbeat(ns, "G", "c1", topics=[T], labels=labels, declared_lane="v5")
    assert (view["desired_lane"], view["explicit_gray"]) == ("v4", True)
    ns.put("/v1/groups/G/clients/c1/flag", json={"gray": False})
    assert client_heartbeat(ns, "G", "c1", topics=[T], labels=labels)["desired_lane"] is None
    ns.put("/v1/groups/G/switch", json={"enabled": False})
    ns.put("/v1/groups/G/clients/c1/flag", json={"gray": True, "lane": "v4"})
    off = client_heartbeat(ns, "G", "c1", topics=[T], labels=labels)
    assert (off["desired_lane"], off["desired_gray"], off["lanes"]) == (None, False, {})
    assert [r["lane"] for r in ns.get("/v1/rules").json()] == ["v3"]
    assert ns.delete(f"/v1/rules/{all_groups.json()['id']}").status_code == 204
    assert ns.get("/v1/rules").json() == []
    entries = ns.get("/v1/audit", params={"limit": 50}).json()
    assert ("rule", "delete") in [(e["object_type"], e["action"]) for e in entries]
    taken = [(e["actor"], e["object_id"], e["after"], e["group"]) for e in entries if e["action"] == "take_slot"]
    assert taken[-1] == ("c1", "v5", {"topic": T, "slot": 0, "group": "G"}, None)


def test_taking_part_and_the_orphan_policy_of_each_lane(ns: TestClient) -> None:
    put_topic(ns, lanes=3)
    ns.post("/v1/groups/RULED/rules", json={"selector": {"v": "3"}, "gray": True, "lane": "v3"})
    ns.post("/v1/rules", json={"selector": {"pod": "v2-*"}, "gray": True, "lane": "v2"})
    client_heartbeat(ns, "JOINED", "c-v2", topics=[T], labels={"pod": "v2-a"})  # takes v2's slot, joins v2
    outsider = client_heartbeat(ns, "OUTSIDER", "c-base", topics=[T])
    assert outsider["lanes"] == {"v2": {"orphan_policy": "adopt", "taking_part": False}}  # all-groups rule alone
    ruled = client_heartbeat(ns, "RULED", "c-base", topics=[T])
    assert ruled["lanes"] == {"v2": {"orphan_policy": "adopt", "taking_part": False},
                              "v3": {"orphan_policy": "hold", "taking_part": True}}
    joined = client_heartbeat(ns, "JOINED", "c-base", topics=[T])
    assert joined["lanes"]["v2"] == {"orphan_policy": "hold", "taking_part": True}
    ns.put("/v1/groups/OUTSIDER/orphan-policy", json={"policy": "adopt"})
    override = ns.put("/v1/groups/OUTSIDER/lanes/v2/orphan-policy", json={"policy": "hold", "reason": "wait"})
    assert override.status_code == 200, override.text
    assert override.json() == {"lane": "v2", "clients": [], "taking_part": False, "orphan_policy": "hold",
                               "orphan_policy_override": "hold", "slots": {T: 0}}
    lanes = {v["lane"]: v for v in ns.get("/v1/groups/JOINED/lanes").json()}
    assert lanes["v2"]["clients"] == ["c-v2 (consumer)"] and lanes["v2"]["taking_part"] is True
    [entry] = [e for e in ns.get("/v1/audit", params={"group": "OUTSIDER"}).json() if e["object_type"] == "lane"]
    assert (entry["object_id"], entry["before"], entry["after"], entry["reason"]) == (
        "v2", {"orphan_policy": None}, {"orphan_policy": "hold"}, "wait")
    assert ns.put("/v1/groups/G/lanes/bad lane/orphan-policy", json={"policy": "hold"}).status_code == 422


def test_a_slot_is_freed_only_once_no_live_client_is_in_its_lane_and_the_lane_then_ends(ns: TestClient) -> None:
    put_topic(ns, lanes=2)
    register_broker(ns)
    client_heartbeat(ns, "G", "c-v2", topics=[T], declared_lane="v2", gray=True, lane="v2", state="GRAY")
    held = ns.delete(f"/v1/topics/{T}/lanes/v2")
    assert held.status_code == 409
    assert error_line(held) == ("CONFLICT: lane v2 still has 1 live client(s) on topic T_LANES: c-v2 (consumer of "
                                "G); move them out of the lane or stop them before freeing its slot")
    assert ns.delete("/v1/groups/G/clients/c-v2").status_code == 204
    freed = ns.delete(f"/v1/topics/{T}/lanes/v2", params={"reason": "promoted"})
    assert freed.status_code == 200 and freed.json() == {"topic": T, "lane_slots": 2, "lanes": {}}
    assert ns.get(f"/v1/topics/{T}/route").json()["lanes"] == {}
    assert client_heartbeat(ns, "G", "c-base", topics=[T])["lanes"] == {}  # the record of taking part ended
    taken = ns.post(f"/v1/topics/{T}/lanes/v9")
    assert taken.json() == {"topic": T, "lane_slots": 2, "lanes": {"v9": 0}}
    assert ns.post(f"/v1/topics/{T}/lanes/v9").json()["lanes"] == {"v9": 0}  # idempotent
    assert ns.post("/v1/topics/T_NONE/lanes/v9").status_code == 404
    put_topic(ns, "T_PLAIN", gray=0)
    plain = ns.post("/v1/topics/T_PLAIN/lanes/v9")
    assert plain.status_code == 409 and error_line(plain) == (
        "CONFLICT: topic T_PLAIN has no gray queues, so no lane slot: give it some (graymq topic update T_PLAIN "
        "--gray-queues G)")
    assert client_heartbeat(ns, "G", "c-plain", topics=["T_PLAIN"], declared_lane="v9")["desired_lane"] == "v9"
    [free] = [e for e in ns.get("/v1/audit", params={"limit": 20}).json() if e["action"] == "free_slot"]
    assert (free["object_id"], free["before"], free["reason"]) == ("v2", {"topic": T, "slot": 0}, "promoted")


def test_bad_lane_input_is_refused_in_one_line(ns: TestClient) -> None:
    put_topic(ns)
    for body in ({"lane": "v2"}, {"lane": "v 2", "gray": True}, {"declared_lane": "v2", "declared_gray": False}):
        refused = beat(ns, "G", "c1", **body)
        assert refused.status_code == 422 and len(refused.json()["detail"]) == 1, refused.text
    client_heartbeat(ns, "G", "c1")
    assert ns.put("/v1/groups/G/clients/c1/flag", json={"gray": False, "lane": "v2"}).status_code == 422
    assert ns.post("/v1/groups/G/rules", json={"selector": {"a": "b"}, "gray": None, "lane": "v2"}).status_code == 422
    assert ns.post(f"/v1/topics/{T}/lanes/a%2Fb").status_code in (404, 422)


def test_batched_heartbeats_and_watches_carry_lanes(ns: TestClient) -> None:
    put_topic(ns, lanes=1)
    results = ns.post("/v1/clients/heartbeats", json={"heartbeats": [
        {"group": "G", "client_id": "c1", "role": "consumer", "topics": [T], "declared_lane": "v2"},
        {"group": "G", "client_id": "c2", "role": "consumer", "topics": [T], "declared_lane": "v3"},
    ]}).json()["results"]
    assert results[0]["answer"]["desired_lane"] == "v2"
    assert results[1]["status_code"] == 409 and "no free lane slot (1 of 1 held by v2)" in results[1]["detail"]
    known = {"desired_gray": True, "gray_switch": True, "orphan_policy": "hold", "desired_lane": "v2"}
    watch = {"group": "G", "client_id": "c1", "role": "consumer", "timeout_s": 0}
    assert ns.post("/v1/clients/watch", json={**watch, "known": known}).json()["desired_lane"] == "v2"
    ns.put("/v1/groups/G/clients/c1/flag", json={"gray": True, "lane": "v4"})
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        stale = pool.submit(ns.post, "/v1/clients/watch", json={**watch, "known": known, "timeout_s": 30})
        assert stale.result(20).json()["desired_lane"] == "v4"  # it differs at once: answered without waiting
    lanes_known = {**known, "desired_lane": "v4", "lanes": {}}
    answer = ns.post("/v1/clients/watch", json={**watch, "known": lanes_known}).json()
    assert "v4" in answer["lanes"]  # c1 joined v4 as its flag names it


def test_a_refused_heartbeat_takes_back_the_slots_it_took_before_the_refusal(ns: TestClient) -> None:
    put_topic(ns)
    put_topic(ns, "T_A")
    client_heartbeat(ns, "G", "c-v2", topics=[T], declared_lane="v2")
    client_heartbeat(ns, "G", "c1", topics=["T_A", T])
    ns.put("/v1/groups/G/clients/c1/flag", json={"gray": True, "lane": "v3"})
    refused = beat(ns, "G", "c1", topics=["T_A", T])  # T_A (free) comes first, then T (held by v2)
    assert refused.status_code == 409 and "topic T_LANES has no free lane slot (1 of 1 held by v2)" in refused.text
    assert ns.post("/v1/topics/T_A/lanes/v9").json()["lanes"] == {"v9": 0}  # v3 did not keep T_A's slot


def test_a_watch_knowing_the_lanes_wakes_when_another_group_takes_a_slot(ns: TestClient) -> None:
    put_topic(ns, lanes=2)
    answer = client_heartbeat(ns, "G", "c1", topics=[T])
    known = {"desired_gray": False, "gray_switch": True, "orphan_policy": "hold", "desired_lane": None,
             "lanes": answer["lanes"]}
    watch = {"group": "G", "client_id": "c1", "role": "consumer", "known": known}
    assert ns.post("/v1/clients/watch", json={**watch, "timeout_s": 0.2}).json()["lanes"] == {}  # nothing changed
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        woken = pool.submit(ns.post, "/v1/clients/watch", json={**watch, "timeout_s": 60})
        client_heartbeat(ns, "OTHER", "c7", topics=[T], declared_lane="v7")
        assert woken.result(20).json()["lanes"] == {"v7": {"orphan_policy": "adopt", "taking_part": False}}


def test_clearing_the_override_of_a_lane_the_group_never_met_answers_its_default(ns: TestClient) -> None:
    """Found by the OpenAPI fuzzer: a null policy for a lane with no record, client or slot was a 500."""
    answer = ns.put("/v1/groups/NEW_GROUP/lanes/v9/orphan-policy", json={"policy": None, "reason": None})
    assert answer.status_code == 200, answer.text
    assert (answer.json()["lane"], answer.json()["orphan_policy"], answer.json()["taking_part"]) == ("v9", "adopt",
                                                                                                        False)


def test_a_lanes_promote_freezes_the_marks_of_that_lane_only(ns: TestClient) -> None:
    """A producer of a group a v2 promote covers stops honouring v2's marks, and only those: v3's flow on. Its
    ``gray_marks``, for producers from before lanes, is false while any lane's promote covers it."""
    def producer_answer(**fields: Any) -> Any:
        answer = ns.post("/v1/clients/heartbeat", json={"group": "P_MARKS", "client_id": "p1", "role": "producer",
                                                        "gray_marks": True, **fields})
        assert answer.status_code == 200, answer.text
        return answer.json()

    before = producer_answer()
    assert (before["gray_marks"], before["lane_marks"], before["frozen_lanes"]) == (True, True, [])
    assert beat(ns, "G_MARKS", "c1").status_code == 200
    rollback = ns.post("/v1/groups/G_MARKS/cutovers", json={"kind": "rollback", "producer_groups": ["P_MARKS"],
                                                            "lane": "v3"})
    assert rollback.status_code in (200, 201), rollback.text
    promote = ns.post("/v1/groups/G_MARKS/cutovers", json={"kind": "promote", "producer_groups": ["P_MARKS"],
                                                           "lane": "v2"})
    assert promote.status_code in (200, 201), promote.text
    during = producer_answer(frozen_lanes=["v2", "v3"])
    assert (during["gray_marks"], during["lane_marks"], during["frozen_lanes"]) == (False, True, ["v2", "v3"])
    [row] = ns.get("/v1/groups/P_MARKS/clients").json()["clients"]
    assert row["frozen_lanes"] == ["v2", "v3"]
    ns.patch(f"/v1/cutovers/{promote.json()['id']}", json={"state": "SUCCEEDED"})
    after = producer_answer(frozen_lanes=["v3"])
    assert (after["gray_marks"], after["lane_marks"], after["frozen_lanes"]) == (False, True, ["v3"])
