"""Routes are served from memory, yet a change of brokers or topics shows at once on the replica that made it,
through NOTIFY on the others (PostgreSQL), and an expired lease as it ends."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from nameserver_testkit import broker_heartbeat, serve, settle_notifications, wait_until

pytestmark = pytest.mark.integration

FOREVER_S = 3600.0  # a cached route outlives the test: only a change notification renews it
LEASE_S = 2  # the expiring broker's lease


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def layouts(http: TestClient, topic: str) -> dict[str, int]:
    """broker name -> queue count in the topic's route."""
    response = http.get(f"/v1/topics/{topic}/route")
    assert response.status_code == 200, response.text
    return {b["broker_name"]: b["queue_nums"] for b in response.json()["brokers"]}


@pytest.fixture
def cached_forever(db_url: str) -> Iterator[TestClient]:
    with serve(db_url) as http:
        http.app.state.route_views.max_age_s = FOREVER_S  # type: ignore[attr-defined]
        yield http


def test_a_heartbeat_changing_a_route_is_served_at_once_by_the_replica_that_took_it(
    cached_forever: TestClient,
) -> None:
    topic, b1, b2 = unique("T"), unique("b1"), unique("b2")
    broker_heartbeat(cached_forever, b1, (topic, 4, 0))
    assert layouts(cached_forever, topic) == {b1: 4}
    broker_heartbeat(cached_forever, b1, (topic, 8, 0))  # the broker grew the topic
    assert layouts(cached_forever, topic) == {b1: 8}
    broker_heartbeat(cached_forever, b2, (topic, 8, 0))  # another broker carries it
    assert layouts(cached_forever, topic) == {b1: 8, b2: 8}
    broker_heartbeat(cached_forever, b1)  # and the first no longer does
    assert layouts(cached_forever, topic) == {b2: 8}


def test_a_registration_that_changes_nothing_keeps_the_routes_served_from_memory(
    cached_forever: TestClient,
) -> None:
    """Brokers register every few seconds: a renewal alone drops no route (every replica's cache was dropped at
    each), while a broker moving to another address does."""
    topic, broker = unique("T"), unique("b")
    views = cached_forever.app.state.route_views  # type: ignore[attr-defined]
    broker_heartbeat(cached_forever, broker, (topic, 4, 0))
    settle_notifications(cached_forever)
    assert layouts(cached_forever, topic) == {broker: 4}
    route = views.cached(topic)
    broker_heartbeat(cached_forever, broker, (topic, 4, 0))  # the same report
    settle_notifications(cached_forever)
    assert views.cached(topic) is route
    moved = cached_forever.post("/v1/brokers/heartbeat", json={"broker_name": broker, "address": "10.9.9.9:10911",
                                                               "topics": [{"topic": topic, "queue_nums": 4}]})
    assert moved.status_code == 200, moved.text
    assert views.cached(topic) is None
    assert [b["address"] for b in cached_forever.get(f"/v1/topics/{topic}/route").json()["brokers"]] == [
        "10.9.9.9:10911"]


def test_a_broker_back_from_an_ended_lease_is_routed_at_once(cached_forever: TestClient) -> None:
    topic, lasting, back = unique("T"), unique("b1"), unique("b2")
    broker_heartbeat(cached_forever, lasting, (topic, 4, 0))
    registered = broker_heartbeat(cached_forever, back, (topic, 4, 0))
    left = cached_forever.post("/v1/brokers/unregister",
                               json={"broker_name": back, "address": f"10.0.0.{len(back)}:10911"})
    assert left.json() == {"unrouted": True} and registered["lease_seconds"] > 0
    settle_notifications(cached_forever)
    assert layouts(cached_forever, topic) == {lasting: 4}
    broker_heartbeat(cached_forever, back, (topic, 4, 0))  # the report it made before its lease ended
    assert layouts(cached_forever, topic) == {lasting: 4, back: 4}


def test_a_topic_change_is_served_at_once(cached_forever: TestClient) -> None:
    broker_heartbeat(cached_forever, unique("b"))
    topic = unique("T")
    put = cached_forever.put(f"/v1/topics/{topic}", json={"queue_nums": 4, "gray_queue_nums": 1})
    assert put.status_code == 201, put.text
    assert cached_forever.get(f"/v1/topics/{topic}/route").json()["queue_nums"] == 4
    put = cached_forever.put(f"/v1/topics/{topic}", json={"queue_nums": 6, "gray_queue_nums": 1})
    assert put.status_code == 200, put.text
    assert cached_forever.get(f"/v1/topics/{topic}/route").json()["queue_nums"] == 6
    assert cached_forever.delete(f"/v1/topics/{topic}").status_code == 204
    assert cached_forever.get(f"/v1/topics/{topic}/route").status_code == 404


def test_a_heartbeat_through_one_replica_renews_the_route_another_serves_from_memory(
    db_url: str, cached_forever: TestClient
) -> None:
    topic, broker = unique("T"), unique("b")
    with serve(db_url) as other:
        broker_heartbeat(other, broker, (topic, 4, 0))
        assert layouts(cached_forever, topic) == {broker: 4}
        broker_heartbeat(other, broker, (topic, 8, 0))
        wait_until(lambda: layouts(cached_forever, topic) == {broker: 8}, what="the other replica's NOTIFY")


def test_an_expired_lease_leaves_a_route_served_from_memory(db_url: str) -> None:
    topic, lasting, expiring = unique("T"), unique("b1"), unique("b2")
    with serve(db_url, broker_lease_seconds=LEASE_S) as short, serve(db_url) as long:
        short.app.state.route_views.max_age_s = FOREVER_S  # type: ignore[attr-defined]
        broker_heartbeat(long, lasting, (topic, 4, 0))
        for _attempt in range(5):  # a loaded machine may read the route after the short lease has ended
            renewed = time.monotonic()
            broker_heartbeat(short, expiring, (topic, 4, 0))
            first = layouts(short, topic)
            if time.monotonic() - renewed < LEASE_S:
                break
        assert first == {lasting: 4, expiring: 4}
        # asked again and again, the route stays cached until the first lease of its brokers ends, then drops it
        wait_until(lambda: layouts(short, topic) == {lasting: 4}, what="the expired broker leaving the route")


def test_several_routes_in_one_request_are_each_what_its_own_request_answers(cached_forever: TestClient) -> None:
    topic, broker, unknown = unique("T"), unique("b"), unique("NONE")
    broker_heartbeat(cached_forever, broker, (topic, 4, 0))
    response = cached_forever.post("/v1/topic-routes", json={"topics": [topic, unknown, topic]})
    assert response.status_code == 200, response.text
    found, missing, again = response.json()["results"]
    assert found["route"] == again["route"] == cached_forever.get(f"/v1/topics/{topic}/route").json()
    assert (missing["status_code"], missing["route"]) == (404, None) and unknown in missing["error"]
    for bad in ({"topics": []}, {"topics": ["a b"]}, {"topics": [topic] * 501}, {}, {"topics": "T"}):
        refused = cached_forever.post("/v1/topic-routes", json=bad)
        assert refused.status_code == 422, (bad, refused.text)
