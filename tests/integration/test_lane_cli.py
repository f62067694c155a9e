"""The lane commands (docs/lanes.md) through the real ``graymq`` CLI against a real name server and broker: room for
lanes on a topic (grown, never shrunk), producers and consumers started in a lane, the one-line refusal of a lane
finding no free slot, lane flags, lane rules of a group and of every group, the orphan policy per lane, and
``gray status`` showing each lane; bad input is refused in one line before anything changes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.cli import graymq, json_lines, produce, start_consumer, wait_for
from tests.support.cluster import Cluster

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(db: str, graymq_process: Any, tmp_path: Path) -> Cluster:
    c = Cluster(graymq_process, db, tmp_path)
    c.start_nameserver()
    return c


def refused(ns_url: str, *args: str, code: int = 1) -> str:
    """Run a command that must fail with exit ``code`` and one line on stderr, stdout empty; returns the line."""
    result = graymq(ns_url, *args, check=False)
    assert result.returncode == code, f"{result.stdout}\n{result.stderr}"
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr and not result.stdout, result.stderr
    return lines[0]


def as_json(ns_url: str, *args: str) -> Any:
    return json.loads(graymq(ns_url, *args, "--json").stdout)


def beat(ns_url: str, group: str, client_id: str, **fields: Any) -> None:
    body = {"group": group, "client_id": client_id, "role": "consumer", **fields}
    httpx.post(f"{ns_url}/v1/clients/heartbeat", json=body, timeout=10).raise_for_status()


def desired_lane(ns_url: str, group: str, client_id: str) -> str | None:
    clients = httpx.get(f"{ns_url}/v1/groups/{group}/clients", timeout=10).json()["clients"]
    [client] = [c for c in clients if c["client_id"] == client_id]
    return client["desired_lane"] or ("gray" if client["desired_gray"] else None)


def test_a_topic_gets_room_for_lanes_grows_and_refuses_to_shrink_in_one_line(cluster: Cluster) -> None:
    cluster.add_broker("broker-a")
    ns = cluster.ns_url
    plain = graymq(ns, "topic", "create", "T_PLAIN", "--queues", "6", "--gray-queues", "2").stdout
    assert plain == "topic T_PLAIN: 6 queues per broker, gray queues [0, 5]; served by broker-a\n"  # as before lanes
    assert "slot" not in graymq(ns, "topic", "route", "T_PLAIN").stdout
    assert "lanes" not in graymq(ns, "topic", "list").stdout
    created = graymq(ns, "topic", "create", "T_LANES", "--queues", "4", "--gray-queues", "2", "--lanes", "2").stdout
    assert created == ("topic T_LANES: 4 queues per broker, gray queues [0, 3], room for 2 lane(s) of 2 queue(s) "
                       "each; served by broker-a\n")
    [broker] = as_json(ns, "topic", "route", "T_LANES")["brokers"]
    assert (broker["queue_nums"], broker["gray_queues"], broker["lane_slots"]) == (6, [0, 3], 2)
    assert broker["slots"] == [{"slot": 0, "queue_ids": [0, 3], "lane": None},
                               {"slot": 1, "queue_ids": [4, 5], "lane": None}]
    grown = graymq(ns, "topic", "update", "T_LANES", "--lanes", "3").stdout
    assert "room for 3 lane(s) of 2 queue(s) each; served by broker-a" in grown
    route = as_json(ns, "topic", "route", "T_LANES")
    assert [s["queue_ids"] for s in route["brokers"][0]["slots"]] == [[0, 3], [4, 5], [6, 7]]
    assert route["brokers"][0]["queue_nums"] == 8 and route["lanes"] == {}
    shown = graymq(ns, "topic", "route", "T_LANES").stdout
    assert "slot" in shown and "6,7" in shown and "free" in shown
    assert refused(ns, "topic", "update", "T_LANES", "--lanes", "2") == (
        "graymq topic: topic T_LANES has 3 lane slots and cannot shrink to 2 (lanes hold their queues): keep 3 or more")
    listed = {t["topic"]: t for t in as_json(ns, "topic", "list")}
    assert listed["T_LANES"]["lane_slots"] == 3 and "lane_slots" not in listed["T_PLAIN"]
    assert "lanes" in graymq(ns, "topic", "list").stdout.splitlines()[0]
    assert refused(ns, "topic", "update", "T_NONE", "--lanes", "2") == (
        "graymq topic: topic T_NONE is not known to the name server")
    assert refused(ns, "topic", "create", "T_BAD", "--queues", "4", "--lanes", "2", code=2) == (
        "graymq topic: --lanes 2 needs --gray-queues 1 or more (each lane has that many queues)")
    assert "T_BAD" not in {t["topic"] for t in as_json(ns, "topic", "list")}


def test_producers_and_consumers_run_in_a_lane_and_a_lane_without_a_slot_is_refused_in_one_line(
    cluster: Cluster, graymq_process: Any
) -> None:
    cluster.add_broker("broker-a")
    ns = cluster.ns_url
    graymq(ns, "topic", "create", "T_RUN", "--queues", "4", "--gray-queues", "1", "--lanes", "2")
    graymq(ns, "gray", "switch", "G_RUN", "on")
    v3 = start_consumer(graymq_process, ns, "G_RUN", "c-v3", "T_RUN", "*", "--lane", "v3")
    base = start_consumer(graymq_process, ns, "G_RUN", "c-base", "T_RUN")
    assert "(v3)" in v3.output
    slot = as_json(ns, "topic", "route", "T_RUN")["lanes"]["v3"]
    [v3_queue] = as_json(ns, "topic", "route", "T_RUN")["brokers"][0]["slots"][slot]["queue_ids"]
    sends = produce(ns, "T_RUN", "--group", "G_RUN", "--lane", "v3", "--count", "4")
    assert {(s["queue_id"], s["lane"], s["gray"]) for s in sends} == {(v3_queue, "v3", True)}
    wait_for(lambda: len(json_lines(v3)) == 4, 30, "the v3 messages at the v3 consumer")
    normal = produce(ns, "T_RUN", "--group", "G_RUN", "--count", "4")
    assert all(s["lane"] is None and not s["gray"] for s in normal)
    wait_for(lambda: len(json_lines(base)) == 4, 30, "the base messages at the base consumer")
    assert len(json_lines(v3)) == 4
    v2 = start_consumer(graymq_process, ns, "G_RUN", "c-v2", "T_RUN", "*", "--lane", "v2")
    assert set(as_json(ns, "topic", "route", "T_RUN")["lanes"]) == {"v2", "v3"}
    assert refused(ns, "consume", "T_RUN", "--group", "G_RUN", "--client-id", "c-v4", "--lane", "v4") == (
        "graymq consume: ERROR topic T_RUN has no free lane slot (2 of 2 held by v2, v3): grow it (graymq topic "
        "update T_RUN --lanes 3) or end a lane")
    assert refused(ns, "produce", "T_RUN", "--lane", "v4", "--body", "x") == (
        "graymq produce: topic T_RUN has no free lane slot (2 of 2 held by v2, v3): grow it (graymq topic update "
        "T_RUN --lanes 3) or end a lane")
    lanes = {lane["lane"]: lane for lane in as_json(ns, "gray", "status", "G_RUN")["lanes"]}
    assert set(lanes) == {"v2", "v3"}
    assert lanes["v3"]["clients"] == ["c-v3 (consumer)"]
    assert [q for q in lanes["v3"]["queues"] if ":T_RUN:" in q] == [f"broker-a:T_RUN:{v3_queue}"]  # and its retries
    assert (lanes["v3"]["backlog"], lanes["v3"]["taking_part"], lanes["v3"]["orphan_policy"]) == (0, True, "hold")
    assert lanes["v3"]["state"] == "consuming"
    table = graymq(ns, "gray", "status", "G_RUN").stdout
    assert "taking part" in table and "c-v2 (consumer)" in table
    [v3_row] = [line.split() for line in table.splitlines() if line.startswith("c-v3 ")]
    assert v3_row[1:4] == ["consumer", "v3", "v3"]  # desired and effective name the lane
    v3.terminate()  # the group takes part in v3: its queue waits for a v3 consumer, base consumers leave it
    wait_for(lambda: lanes_of(ns, "G_RUN")["v3"]["clients"] == [], 30, "the v3 consumer to leave")
    produce(ns, "T_RUN", "--group", "G_RUN", "--lane", "v3", "--count", "3")
    status = as_json(ns, "gray", "status", "G_RUN")
    held = {lane["lane"]: lane for lane in status["lanes"]}["v3"]
    assert (held["backlog"], held["state"]) == (3, "held")
    assert status["gray_backlog"] == 0
    assert v3_queue not in {q["queue_id"] for q in status["gray_queues"] if q["topic"] == "T_RUN"}
    for proc in (v2, base):
        proc.terminate()


def lanes_of(ns_url: str, group: str) -> dict[str, Any]:
    return {lane["lane"]: lane for lane in as_json(ns_url, "gray", "status", group)["lanes"]}


def test_produce_and_consume_refuse_a_bad_lane_in_one_line(cluster: Cluster) -> None:
    ns = cluster.ns_url
    graymq(ns, "topic", "create", "T_ARGS", "--queues", "4", "--gray-queues", "1")
    assert refused(ns, "produce", "T_ARGS", "--body", "x", "--gray", "--lane", "v3", code=2) == (
        "graymq produce: give --gray or --lane v3, not both (--gray is --lane gray)")
    line = refused(ns, "consume", "T_ARGS", "--group", "G", "--lane", "v 3", code=2)
    assert line.startswith("graymq consume: invalid lane name 'v 3'")


def test_lane_flags_are_set_and_taken_off_only_for_the_lane_a_client_is_in(cluster: Cluster) -> None:
    ns = cluster.ns_url
    graymq(ns, "gray", "switch", "G_FLAG", "on")
    beat(ns, "G_FLAG", "c1")
    assert graymq(ns, "gray", "flag", "G_FLAG", "c1", "--lane", "v3", "on").stdout == (
        "G_FLAG/c1: explicit flag on (lane v3); desired now v3\n")
    assert desired_lane(ns, "G_FLAG", "c1") == "v3"
    assert refused(ns, "gray", "flag", "G_FLAG", "c1", "--lane", "v2", "off", code=2) == (
        "graymq gray: client c1 of G_FLAG is not in lane v2 (it is in base, v3): nothing to turn off; give the lane "
        "it is in, or no --lane")
    assert refused(ns, "gray", "flag", "G_FLAG", "c1", "--lane", "v3", "auto", code=2) == (
        "graymq gray: auto clears the client's flag whatever lane it names: give no --lane")
    assert refused(ns, "gray", "flag", "G_FLAG", "c9", "--lane", "v3", "off", code=2) == (
        "graymq gray: client c9 is not known in group G_FLAG")
    assert refused(ns, "gray", "flag", "G_FLAG", "c1", "--lane", "v/3", "on", code=2).startswith(
        "graymq gray: invalid lane name 'v/3'")
    assert desired_lane(ns, "G_FLAG", "c1") == "v3"  # nothing refused changed anything
    off = graymq(ns, "gray", "flag", "G_FLAG", "c1", "--lane", "v3", "off").stdout
    assert off.startswith("G_FLAG/c1: explicit flag off (lane v3); desired now base")
    assert desired_lane(ns, "G_FLAG", "c1") is None
    assert graymq(ns, "gray", "flag", "G_FLAG", "c1", "--lane", "gray", "on").stdout == (
        "G_FLAG/c1: explicit flag on (lane gray); desired now gray\n")
    assert graymq(ns, "gray", "flag", "G_FLAG", "c1", "auto").stdout == (  # today's command, today's line
        "G_FLAG/c1: explicit flag auto; desired now normal\n")


def test_lane_rules_of_a_group_and_of_every_group_are_added_listed_and_removed(cluster: Cluster) -> None:
    ns = cluster.ns_url
    for group in ("G_RULE", "G_OTHER"):
        graymq(ns, "gray", "switch", group, "on")
    assert graymq(ns, "gray", "rule", "G_RULE", "--label", "version=v2", "on").stdout.endswith(
        "clients with version=v2 are gray\n")  # today's rule, today's line
    made = graymq(ns, "gray", "rule", "G_RULE", "--label", "version=v3", "--lane", "v3", "on").stdout
    assert made.endswith("of G_RULE: clients with version=v3 are in lane v3\n")
    listed = as_json(ns, "gray", "rule", "G_RULE", "list")
    assert [(r["selector"], r["lane"]) for r in listed] == [({"version": "v2"}, "gray"), ({"version": "v3"}, "v3")]
    assert "v3" in graymq(ns, "gray", "rule", "G_RULE", "list").stdout
    assert refused(ns, "gray", "rule", "G_NONE", "list") == "graymq gray: group G_NONE is not known to the name server"
    beat(ns, "G_RULE", "c3", labels={"version": "v3"})
    assert desired_lane(ns, "G_RULE", "c3") == "v3"
    assert refused(ns, "gray", "rule", "G_RULE", "--label", "version=v3", "--lane", "v2", "off", code=2) == (
        "graymq gray: no rule of G_RULE has exactly the selector version=v3 and lane v2")
    assert graymq(ns, "gray", "rule", "G_RULE", "--label", "version=v3", "--lane", "v3", "off").stdout == (
        "removed 1 rule(s) of G_RULE with selector version=v3 and lane v3\n")
    assert desired_lane(ns, "G_RULE", "c3") is None

    everywhere = graymq(ns, "gray", "rule", "--all-groups", "--label", "host=orders-v3-*", "--lane", "v3", "on")
    assert "clients with host=orders-v3-* are in lane v3 in every group" in everywhere.stdout
    beat(ns, "G_OTHER", "pod-1", labels={"host": "orders-v3-abc"})
    assert desired_lane(ns, "G_OTHER", "pod-1") == "v3"
    [rule] = as_json(ns, "gray", "rule", "--all-groups", "list")
    assert (rule["selector"], rule["lane"], "group" in rule) == ({"host": "orders-v3-*"}, "v3", False)
    assert refused(ns, "gray", "rule", "G_OTHER", "--all-groups", "--label", "a=b", "on", code=2) == (
        "graymq gray: give GROUP or --all-groups, not both")
    assert refused(ns, "gray", "rule", "--label", "a=b", "on", code=2) == (
        "graymq gray: give GROUP, or --all-groups for a rule of every group")
    assert refused(ns, "gray", "rule", "G_OTHER", "on", code=2) == "graymq gray: rule on needs --label k=v"
    graymq(ns, "gray", "rule", "--all-groups", "--label", "host=orders-v3-*", "--lane", "v3", "off")
    assert as_json(ns, "gray", "rule", "--all-groups", "list") == []
    assert desired_lane(ns, "G_OTHER", "pod-1") is None


def test_the_orphan_policy_is_set_per_lane_and_without_a_lane_as_before(cluster: Cluster) -> None:
    ns = cluster.ns_url
    graymq(ns, "gray", "switch", "G_ORPHAN", "on")
    assert graymq(ns, "gray", "orphan", "G_ORPHAN", "adopt", "--lane", "v3").stdout == (
        "orphan policy of G_ORPHAN for lane v3: adopt (the group's base consumers take its queues while no consumer "
        "of the lane is left)\n")
    lanes = {lane["lane"]: lane for lane in httpx.get(f"{ns}/v1/groups/G_ORPHAN/lanes", timeout=10).json()}
    assert (lanes["v3"]["orphan_policy"], lanes["v3"]["orphan_policy_override"]) == ("adopt", "adopt")
    graymq(ns, "gray", "orphan", "G_ORPHAN", "hold", "--lane", "v3")
    assert httpx.get(f"{ns}/v1/groups/G_ORPHAN/lanes", timeout=10).json()[0]["orphan_policy"] == "hold"
    today = graymq(ns, "gray", "orphan", "G_ORPHAN", "adopt").stdout
    assert today == ("orphan policy of G_ORPHAN: adopt (normal consumers take the gray queues while no gray consumer "
                     "is left)\n")
    assert graymq(ns, "gray", "orphan", "G_ORPHAN", "hold", "--lane", "gray").stdout.startswith(
        "orphan policy of G_ORPHAN: hold")
    assert httpx.get(f"{ns}/v1/groups/G_ORPHAN", timeout=10).json()["orphan_policy"] == "hold"
    assert refused(ns, "gray", "orphan", "G_ORPHAN", "hold", "--lane", "v 3", code=2).startswith(
        "graymq gray: invalid lane name 'v 3'")
