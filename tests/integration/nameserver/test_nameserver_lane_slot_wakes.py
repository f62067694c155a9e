"""A lane slot taken or given back wakes the watches of the groups whose answers show it, on SQLite and PostgreSQL:
those using the topic when the lane already held a slot elsewhere, every group when the lane holds its first slot
or gives back its last (the lanes every group's ``lanes`` lists changed). A fleet's first gray consumers take a slot
on each of their topics: each take woke every group's watches, which all read their groups again."""

from __future__ import annotations

import concurrent.futures
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from nameserver_testkit import client_heartbeat, settle_notifications, wait_until

from graymq.nameserver.clock import utc_now
from graymq.nameserver.repositories.topics import TopicRepository
from graymq.nameserver.watch import EVERY_GROUP, LANE_SLOTS_CHANGED, TOPIC_TABLE_CHANGED, GroupChanges

pytestmark = [pytest.mark.integration, pytest.mark.name_server(client_expiry_seconds=600)]

WATCH_S = 60.0
SLOT_KEYS = {LANE_SLOTS_CHANGED, TOPIC_TABLE_CHANGED}


class Published:
    """The keys of every change the name server publishes, in order (its own commits', and on PostgreSQL each
    NOTIFY's as it arrives)."""

    def __init__(self, ns: TestClient) -> None:
        self.ns = ns
        self.keys: list[set[str] | None] = []
        self.changes: GroupChanges = ns.app.state.group_changes  # type: ignore[attr-defined]
        self.changes.subscribe(self.keys.append)

    def settle(self) -> None:
        """Wait until the notifications of every change committed so far have arrived, then forget them."""
        settle_notifications(self.ns)
        self.keys.clear()

    def since_settled(self) -> set[str]:
        """Every key published since the last ``settle``, once this replica's own commits' are in."""
        return set().union(*(keys or {"<all>"} for keys in self.keys))


def take(ns: TestClient, topic: str, lane: str) -> None:
    taken = ns.post(f"/v1/topics/{topic}/lanes/{lane}")
    assert taken.status_code == 200 and lane in taken.json()["lanes"], taken.text


def give_back(ns: TestClient, topic: str, lane: str) -> None:
    freed = ns.delete(f"/v1/topics/{topic}/lanes/{lane}")
    assert freed.status_code == 200 and lane not in freed.json()["lanes"], freed.text


def watch_body(answer: dict[str, Any]) -> dict[str, Any]:
    known = {k: answer[k] for k in ("desired_gray", "gray_switch", "orphan_policy", "desired_lane", "lanes")}
    return {"group": answer["group"], "client_id": answer["client_id"], "role": "consumer", "known": known,
            "timeout_s": WATCH_S}


def test_a_second_slot_wakes_the_groups_using_its_topic_and_a_new_lane_every_group(ns: TestClient) -> None:
    for topic in ("T_HELD", "T_TAKEN"):
        assert ns.put(f"/v1/topics/{topic}", json={"queue_nums": 8, "gray_queue_nums": 2, "lane_slots": 2}).is_success
    take(ns, "T_HELD", "v2")  # the lane holds a slot already
    using = client_heartbeat(ns, "USING", "c1", topics=["T_TAKEN"])
    other = client_heartbeat(ns, "OTHER", "c2", topics=["T_HELD"])
    assert using["lanes"] == other["lanes"] == {"v2": {"orphan_policy": "adopt", "taking_part": False}}
    published = Published(ns)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        published.settle()
        using_event, other_event = published.changes.changed("USING"), published.changes.changed("OTHER")
        using_watch = pool.submit(ns.post, "/v1/clients/watch", json=watch_body(using))
        other_watch = pool.submit(ns.post, "/v1/clients/watch", json=watch_body(other))
        wait_until(lambda: watching(ns) == 2, what="both watches waiting")

        take(ns, "T_TAKEN", "v2")  # the lanes holding slots stay {v2}: only T_TAKEN's users are concerned
        wait_until(using_event.is_set, what="the watch of the group using T_TAKEN woken")
        assert not other_event.is_set() and not other_watch.done()  # woken together, or not at all
        assert published.changes.changed("OTHER") is other_event  # the OTHER watch still waits on it
        assert published.since_settled() == SLOT_KEYS | {"USING"}
        assert not using_watch.done()  # woken, it read its group again: nothing it watches changed

        take(ns, "T_TAKEN", "v3")  # a new lane: every group's ``lanes`` lists it
        for woken in (using_watch, other_watch):
            answer = woken.result(WATCH_S)
            assert answer.status_code == 200 and set(answer.json()["lanes"]) == {"v2", "v3"}, answer.text
        assert EVERY_GROUP in published.since_settled()


def test_giving_back_wakes_the_groups_using_the_topic_and_every_group_once_the_lane_ends(ns: TestClient) -> None:
    for topic in ("T_KEPT", "T_FREED"):
        assert ns.put(f"/v1/topics/{topic}", json={"queue_nums": 8, "gray_queue_nums": 2, "lane_slots": 2}).is_success
        take(ns, topic, "v2")
    client_heartbeat(ns, "USING", "c1", topics=["T_FREED"])
    client_heartbeat(ns, "OTHER", "c2", topics=["T_KEPT"])
    published = Published(ns)
    published.settle()
    give_back(ns, "T_FREED", "v2")  # v2 still holds T_KEPT's slot
    assert published.since_settled() == SLOT_KEYS | {"USING"}
    published.settle()
    give_back(ns, "T_KEPT", "v2")  # its last slot: the lane ends
    assert published.since_settled() == SLOT_KEYS | {EVERY_GROUP}


def test_the_groups_using_a_topic_are_those_of_its_live_clients(ns: TestClient) -> None:
    client_heartbeat(ns, "A", "a1", topics=["T1", "T2"])
    client_heartbeat(ns, "A", "a2", topics=["T1"])
    client_heartbeat(ns, "B", "b1", topics=["T2"])
    client_heartbeat(ns, "C", "c1", topics=["T10"])  # a name T1 is a prefix of
    client_heartbeat(ns, "D", "d1")  # no topics
    with ns.app.state.read_sessions() as session:  # type: ignore[attr-defined]
        topics = TopicRepository(session)
        an_hour_ago = utc_now() - timedelta(hours=1)
        assert topics.groups_using("T1", an_hour_ago) == {"A"}
        assert topics.groups_using("T2", an_hour_ago) == {"A", "B"}
        assert topics.groups_using("T3", an_hour_ago) == set()
        assert topics.groups_using("T1", utc_now() + timedelta(hours=1)) == set()  # none seen since: none live


def watching(ns: TestClient) -> float:
    metrics = ns.get("/metrics").text
    return sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
               if line.startswith("graymq_nameserver_open_watches"))
