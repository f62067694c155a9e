"""One broker gone must not blind the operator: a broker that stops cleanly leaves the route at once, a killed one
within a few registration intervals, and meanwhile ``gray status`` shows what the other brokers answer, with the
dead one marked (exit 0, a WARNING on stderr)."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import graymq, produce, start_consumer, wait_for

pytestmark = pytest.mark.integration

TOPIC = "T_DEAD"


def routed(ns_url: str) -> set[str]:
    route = json.loads(graymq(ns_url, "topic", "route", TOPIC, "--json").stdout)
    return {b["broker_name"] for b in route["brokers"]}


def two_brokers(cluster, **broker_b_env: str) -> None:
    cluster.add_broker("broker-a")
    cluster.add_broker("broker-b", **broker_b_env)
    cluster.create_topic(TOPIC, 4, 2)
    assert routed(cluster.ns_url) == {"broker-a", "broker-b"}


def test_a_broker_stopped_cleanly_is_gone_from_the_route_at_once(cluster) -> None:
    two_brokers(cluster)
    assert cluster.brokers["broker-b"].terminate() == 0
    assert routed(cluster.ns_url) == {"broker-a"}
    assert "unregistered from name server" in cluster.brokers["broker-b"].output
    cluster.add_broker("broker-b")  # back with the same name: routed again
    wait_for(lambda: routed(cluster.ns_url) == {"broker-a", "broker-b"}, 20, "broker-b routed again")


def test_a_killed_broker_leaves_the_route_within_a_few_registration_intervals(cluster) -> None:
    two_brokers(cluster, GRAYMQ_BROKER_REGISTER_INTERVAL_S="1")
    cluster.brokers["broker-b"].kill()
    # 4 intervals, at least 6 s (the name server's defaults): the lease of a broker was 120 s whatever its interval.
    wait_for(lambda: routed(cluster.ns_url) == {"broker-a"}, 20, "the killed broker leaving the route")


def test_status_with_a_killed_broker_shows_the_other_brokers_figures_and_marks_the_dead_one(
        graymq_process, fresh_pg_url, tmp_path) -> None:
    from tests.support.cluster import Cluster

    cluster = Cluster(graymq_process, fresh_pg_url, tmp_path)
    cluster.start_nameserver(GRAYMQ_BROKER_LEASE_MIN_SECONDS="60")  # the killed broker stays routed meanwhile
    two_brokers(cluster)
    ns = cluster.ns_url
    graymq(ns, "gray", "switch", "G_DEAD", "on")
    start_consumer(graymq_process, ns, "G_DEAD", "c-normal", TOPIC)  # normal: the gray queues keep their backlog
    sends = produce(ns, TOPIC, "--gray", "--count", "8")
    on = {b: sum(s["broker"] == b for s in sends) for b in ("broker-a", "broker-b")}
    assert on["broker-a"] and on["broker-b"], sends
    cluster.brokers["broker-b"].kill()

    result = graymq(ns, "gray", "status", "G_DEAD", "--json")
    status = json.loads(result.stdout)
    assert [b["broker"] for b in status["unavailable_brokers"]] == ["broker-b"]
    assert status["unavailable_brokers"][0]["topics"] == ["%RETRY%G_DEAD", TOPIC]
    assert status["gray_backlog"] is None and status["gray_backlog_known"] == on["broker-a"]
    known = [q for q in status["gray_queues"] if q["available"]]
    unknown = [q for q in status["gray_queues"] if not q["available"] and q["topic"] == TOPIC]
    assert {q["broker"] for q in known} == {"broker-a"} and sum(q["backlog"] for q in known) == on["broker-a"]
    assert {(q["broker"], q["queue_id"], q["backlog"]) for q in unknown} == {("broker-b", 0, None),
                                                                            ("broker-b", 3, None)}
    assert status["lag"]["gray"] is None and [c["client_id"] for c in status["clients"]] == ["c-normal"]
    assert "WARNING: broker broker-b" in result.stderr and "Traceback" not in result.stderr

    text = graymq(ns, "gray", "status", "G_DEAD")
    assert "WARNING: broker broker-b" in text.stderr
    assert f"gray backlog: unknown ({on['broker-a']} on the brokers that answered; unknown on broker-b: " \
           f"broker-b:{TOPIC}:0,3 broker-b:%RETRY%G_DEAD:0,3)" in text.stdout, text.stdout
    assert "gray side: " in text.stdout and "lag unknown" in text.stdout
