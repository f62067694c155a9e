"""Gray consumers that go away, cleanly (SIGINT) or killed (SIGKILL), with real processes and the real CLI.

Clients expire only after ten minutes here (name server and broker) and go stale after three seconds
without a heartbeat (the CLI clients report every half second, FAST_HEARTBEAT), so a promote or rollback that
finishes within its timeout did not wait for an expiry.
"""

from __future__ import annotations

import json
import signal
from typing import Any

import pytest

from graymq.devkit.processes import GraymqProcess
from tests.support.cli import (
    FAST_HEARTBEAT,
    gray_status,
    graymq,
    held_queues,
    json_lines,
    produce,
    start_consumer,
    wait_for,
)
from tests.support.cluster import Cluster

pytestmark = pytest.mark.e2e
GROUP = "GID_DEPART"
TOPIC = "TOPIC_DEPART"
ENV = {"GRAYMQ_CLIENT_EXPIRY_SECONDS": "600", "GRAYMQ_BROKER_CLIENT_EXPIRY_S": "600",
       "GRAYMQ_CLIENT_STALE_SECONDS": "3"}  # 6 heartbeats of FAST_HEARTBEAT


@pytest.fixture
def cluster(graymq_process, fresh_pg_url, tmp_path) -> Cluster:
    cluster = Cluster(graymq_process, fresh_pg_url, tmp_path)
    cluster.start_nameserver(**ENV)
    cluster.add_broker("broker-a", **ENV)
    cluster.create_topic(TOPIC, 6, 2)
    cluster.ns_call(lambda ns: ns.add_rule(GROUP, {"version": "v2"}, True))
    return cluster


def held(ns: str, client_ids: list[str]) -> dict[str, list[int]]:
    """The queue ids of TOPIC each client reports holding."""
    queues = held_queues(ns, GROUP)
    return {c: sorted(int(q.rsplit(":", 1)[1]) for q in queues.get(c, ()) if f":{TOPIC}:" in q) for c in client_ids}


def start(graymq_process, cluster: Cluster, expected: dict[str, list[int]]) -> dict[str, GraymqProcess]:
    """One CLI consumer per client id (labelled with its first two letters), settled on ``expected``."""
    ns = cluster.ns_url
    consumers = {cid: start_consumer(graymq_process, ns, GROUP, cid, TOPIC, "*", "--label", f"version={cid[:2]}",
                                 *FAST_HEARTBEAT)
                 for cid in expected}
    wait_for(lambda: held(ns, list(consumers)) == expected, 40, f"allocation {expected}")
    return consumers


def listed(status: dict[str, Any], key: str = "clients", stale: bool | None = None) -> set[str]:
    """Client ids under ``key``; with ``stale``, only those whose stale mark is that."""
    return {c["client_id"] for c in status[key] if stale is None or c["stale"] is stale}


def shown(ns: str, client_id: str) -> bool:
    """Whether ``gray status`` shows the client at all, live or stale."""
    return client_id in listed(gray_status(ns, GROUP))


def last_json(output: str) -> dict[str, Any]:
    return dict(json.loads(output.strip().splitlines()[-1]))


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL], ids=["stopped", "killed"])
def test_rollback_adopt_does_not_wait_for_a_gray_consumer_that_went_away(cluster, graymq_process, how):
    ns = cluster.ns_url
    consumers = start(graymq_process, cluster, {"v1": [1, 2, 3, 4], "v2": [0, 5]})
    gray = consumers.pop("v2")
    gray.proc.send_signal(how)
    gray.proc.wait(30)
    if how == signal.SIGINT:
        assert gray.proc.returncode == 0, gray.output[-2000:]
        wait_for(lambda: not shown(ns, "v2"), 5, "the stopped consumer leaving gray status")
    else:
        wait_for(lambda: "v2" in listed(gray_status(ns, GROUP), "stale_clients"), 30, "the killed consumer stale")
        status = gray_status(ns, GROUP)
        assert listed(status, stale=True) == {"v2"} and listed(status, stale=False) == {"v1"}
        (stale,) = status["stale_clients"]
        assert stale["gray"] and stale["role"] == "consumer" and stale["stale"]
        assert [c for c in status["clients"] if c["client_id"] == "v2"] == [stale]
        table = graymq(ns, "gray", "status", GROUP).stdout
        assert "stale (no heartbeat;" in table and "v2 (consumer, gray)" in table
    sent = produce(ns, TOPIC, "--group", GROUP, "--label", "version=v2", "--count", "50", "--size", "32",
                   *FAST_HEARTBEAT)
    assert all(s["gray"] for s in sent)
    report = last_json(graymq(ns, "gray", "rollback", GROUP, "--adopt", "--timeout", "45", "--json", timeout=90).stdout)
    assert report["state"] == "SUCCEEDED" and report["gray_backlog"] == 0, report
    assert report["stale_clients"] == ([] if how == signal.SIGINT else ["v2"])
    wait_for(lambda: {s["msg_id"] for s in sent} <= {m["msg_id"] for m in json_lines(consumers["v1"])}, 30,
             "v1 adopting every gray message")


def test_promote_does_not_wait_for_a_killed_gray_consumer_beyond_the_stale_window(cluster, graymq_process):
    ns = cluster.ns_url
    consumers = start(graymq_process, cluster, {"v1": [1, 2, 3, 4], "v2a": [0], "v2b": [5]})
    killed = consumers.pop("v2a")
    killed.kill()
    # the broker saw v2a's connection close: v2b takes queue 0 over and consumes what lands there
    wait_for(lambda: held(ns, ["v2b"]) == {"v2b": [0, 5]}, 30, "v2b taking the killed consumer's gray queue")
    sent = produce(ns, TOPIC, "--group", GROUP, "--label", "version=v2", "--count", "40", "--size", "32",
                   *FAST_HEARTBEAT)
    result = graymq(ns, "gray", "promote", GROUP, "--timeout", "60", "--json", timeout=90, check=False)
    report = last_json(result.stdout)
    assert result.returncode == 0 and report["state"] == "SUCCEEDED", report
    assert report["gray_backlog"] == 0 and not report["gray_consumers_left"]
    assert report["stale_clients"] == ["v2a"]
    assert sorted(report["consumers_flipped"]) == ["v2a", "v2b"]  # flipped too, in case it comes back
    v2b_consumed = {m["msg_id"] for m in json_lines(consumers["v2b"])}
    assert {s["msg_id"] for s in sent} <= v2b_consumed
    status = gray_status(ns, GROUP)
    assert listed(status, stale=False) == {"v1", "v2b"} and listed(status, "stale_clients") == {"v2a"}
    assert listed(status) == {"v1", "v2a", "v2b"} and listed(status, stale=True) == {"v2a"}
    assert not any(c["gray"] for c in status["clients"] if not c["stale"])


def test_promote_waits_for_a_stale_gray_producer_until_it_reports_normal(cluster, graymq_process):
    """A paused gray producer goes stale but may still reach the brokers: promote must not flip the gray
    consumers before it reports normal, or its later gray messages would sit in gray queues nobody drains."""
    ns = cluster.ns_url
    consumers = start(graymq_process, cluster, {"v1": [1, 2, 3, 4], "v2": [0, 5]})
    producer = graymq_process("produce", TOPIC, "--group", GROUP, "--label", "version=v2", "--client-id", "pv2",
                              "--count", "300", "--size", "32", "--interval", "0.05", "--json", "--nameserver", ns,
                              *FAST_HEARTBEAT, wait=False)
    wait_for(lambda: sum(s.get("gray", False) for s in json_lines(producer)) >= 20, 30, "gray sends")
    producer.proc.send_signal(signal.SIGSTOP)
    try:
        wait_for(lambda: "pv2" in listed(gray_status(ns, GROUP), "stale_clients"), 30, "the paused producer stale")
        status = gray_status(ns, GROUP)
        (pv2,) = [c for c in status["clients"] if c["client_id"] == "pv2"]
        assert pv2["stale"] and pv2["gray"] and pv2["role"] == "producer"
        result = graymq(ns, "gray", "promote", GROUP, "--timeout", "5", "--json", timeout=60, check=False)
        report = last_json(result.stdout)
        assert result.returncode == 1 and report["state"] == "FAILED", report
        assert "producers still gray: pv2 (stale" in report["message"], report
        assert f"{GROUP}/pv2" in report["stale_clients"]
        assert {c["client_id"] for c in gray_status(ns, GROUP)["clients"] if c["gray"]} == {"v2", "pv2"}
    finally:
        producer.proc.send_signal(signal.SIGCONT)
    report = last_json(graymq(ns, "gray", "promote", GROUP, "--timeout", "60", "--json", timeout=90).stdout)
    assert report["state"] == "SUCCEEDED", report
    assert producer.proc.wait(60) == 0, producer.output[-2000:]
    sent = json_lines(producer)
    assert len(sent) == 300 and all(s["status"] == "SEND_OK" for s in sent)
    gray_sent = {s["msg_id"] for s in sent if s["gray"]}
    assert gray_sent and len(gray_sent) < 300
    wait_for(lambda: {s["msg_id"] for s in sent} <= {m["msg_id"] for c in consumers.values() for m in json_lines(c)},
             30, "every message consumed, none stranded in a gray queue")
    wait_for(lambda: gray_status(ns, GROUP)["gray_backlog"] == 0, 10, "the gray backlog committed to 0")
