"""Topic and group management through the real `graymq` CLI, on SQLite and PostgreSQL: a created topic is usable at
once, a topic never shrinks, unknown groups are named as such, groups and topics are listed and deleted (refused
while live clients remain), and the orphan policy, cutover history and audit log have their commands."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.cli import graymq, produce, start_consumer, wait_for
from tests.support.cluster import Cluster

pytestmark = pytest.mark.integration

DEFAULT_REGISTER_INTERVAL = {"GRAYMQ_BROKER_REGISTER_INTERVAL_S": "3"}  # what a broker uses out of the box


@pytest.fixture
def cluster(db: str, graymq_process: Any, tmp_path: Path) -> Cluster:
    c = Cluster(graymq_process, db, tmp_path)
    c.start_nameserver()
    return c


def fails(ns_url: str, *args: str) -> str:
    """Run a command that must fail with exit 1 and one clear line on stderr; returns that line."""
    result = graymq(ns_url, *args, check=False)
    assert result.returncode == 1, f"{result.stdout}\n{result.stderr}"
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def as_json(ns_url: str, *args: str) -> Any:
    return json.loads(graymq(ns_url, *args, "--json").stdout)


def broker_topics(ns_url: str) -> dict[str, set[str]]:
    return {b["broker_name"]: set(b["topics"]) for b in httpx.get(f"{ns_url}/v1/brokers", timeout=5).json()}


def test_a_topic_is_usable_on_every_broker_as_soon_as_create_returns(cluster: Cluster) -> None:
    for name in ("broker-a", "broker-b"):
        cluster.add_broker(name, **DEFAULT_REGISTER_INTERVAL)
    ns = cluster.ns_url
    for i in range(6):
        topic = f"T_NOW_{i}"
        created = graymq(ns, "topic", "create", topic, "--queues", "4", "--gray-queues", "2")
        assert "served by broker-a, broker-b" in created.stdout
        sends = produce(ns, topic, "--count", "4")  # at once: every send must succeed
        assert {s["broker"] for s in sends} == {"broker-a", "broker-b"}


def test_shrinking_a_topic_is_refused_in_one_line_and_changes_nothing(cluster: Cluster) -> None:
    cluster.add_broker("broker-a")
    ns = cluster.ns_url
    graymq(ns, "topic", "create", "T_SIX", "--queues", "6", "--gray-queues", "2")
    line = fails(ns, "topic", "create", "T_SIX", "--queues", "2")
    assert "T_SIX has 6 queues per broker and cannot shrink to 2" in line
    route = as_json(ns, "topic", "route", "T_SIX")
    assert [b["queue_nums"] for b in route["brokers"]] == [6]
    assert "cannot shrink" not in cluster.brokers["broker-a"].output


def test_gray_status_of_an_unknown_group_says_so_and_creates_nothing(cluster: Cluster) -> None:
    ns = cluster.ns_url
    assert fails(ns, "gray", "status", "NO_SUCH_GROUP") == "graymq gray: group NO_SUCH_GROUP is not known to the " \
                                                            "name server"
    assert fails(ns, "gray", "history", "NO_SUCH_GROUP").endswith("group NO_SUCH_GROUP is not known to the name server")
    assert "NO_SUCH_GROUP" not in {g["group"] for g in as_json(ns, "group", "list")}


def test_a_mistyped_group_is_listed_then_deleted_with_its_retry_topic_once_its_consumer_stops(
    cluster: Cluster, graymq_process: Any
) -> None:
    cluster.add_broker("broker-a")
    ns = cluster.ns_url
    graymq(ns, "topic", "create", "T_ORDERS", "--queues", "4", "--gray-queues", "2")
    consumer = start_consumer(graymq_process, ns, "GID_TYPO", "typo-1", "T_ORDERS")
    wait_for(lambda: "%RETRY%GID_TYPO" in broker_topics(ns)["broker-a"], 30, "the retry topic on the broker")
    listed = {g["group"]: g for g in as_json(ns, "group", "list")}
    assert listed["GID_TYPO"]["live_clients"] == 1
    table = graymq(ns, "group", "list").stdout
    assert "live clients" in table and "GID_TYPO" in table
    line = fails(ns, "group", "delete", "GID_TYPO")
    assert "GID_TYPO is in use by live clients: typo-1 (consumer)" in line
    consumer.terminate()
    deleted = graymq(ns, "group", "delete", "GID_TYPO", "--reason", "typo")
    assert "GID_TYPO deleted" in deleted.stdout
    assert "GID_TYPO" not in {g["group"] for g in as_json(ns, "group", "list")}
    assert "%RETRY%GID_TYPO" not in {t["topic"] for t in as_json(ns, "topic", "list")}
    wait_for(lambda: "%RETRY%GID_TYPO" not in broker_topics(ns)["broker-a"], 30, "the broker to drop the retry topic")
    entries = as_json(ns, "audit", "--group", "GID_TYPO")
    assert (entries[0]["action"], entries[0]["object_type"], entries[0]["reason"]) == ("delete", "group", "typo")
    assert fails(ns, "group", "delete", "GID_TYPO").endswith("group GID_TYPO is not known to the name server")


def test_a_topic_is_deleted_only_once_no_live_client_uses_it(cluster: Cluster, graymq_process: Any) -> None:
    cluster.add_broker("broker-a")
    ns = cluster.ns_url
    graymq(ns, "topic", "create", "T_OLD", "--queues", "4")
    consumer = start_consumer(graymq_process, ns, "GID_OLD", "old-1", "T_OLD")
    line = fails(ns, "topic", "delete", "T_OLD")
    assert "T_OLD is in use by live clients: old-1 (consumer of GID_OLD)" in line
    consumer.terminate()
    assert "T_OLD deleted" in graymq(ns, "topic", "delete", "T_OLD", "--reason", "retired").stdout
    wait_for(lambda: "T_OLD" not in broker_topics(ns)["broker-a"], 30, "the broker to drop the topic")
    assert "T_OLD" not in {t["topic"] for t in as_json(ns, "topic", "list")}
    entry = as_json(ns, "audit", "--limit", "1")[0]
    assert (entry["object_type"], entry["object_id"], entry["action"], entry["reason"]) == (
        "topic", "T_OLD", "delete", "retired")
    refused = graymq(ns, "produce", "T_OLD", "--body", "x", check=False)
    assert refused.returncode == 1 and "T_OLD is unknown" in refused.stderr


def test_orphan_policy_cutover_history_and_audit_commands(cluster: Cluster) -> None:
    ns = cluster.ns_url
    assert "orphan policy of GID_H: adopt" in graymq(ns, "gray", "orphan", "GID_H", "adopt", "--reason", "drill").stdout
    assert httpx.get(f"{ns}/v1/groups/GID_H", timeout=5).json()["orphan_policy"] == "adopt"
    assert "no promote, rollback or rollout of GID_H recorded" in graymq(ns, "gray", "history", "GID_H").stdout
    graymq(ns, "gray", "rule", "GID_H", "--label", "version=v2", "on")  # a release to promote (its rule goes)
    graymq(ns, "gray", "promote", "GID_H", "--timeout", "30")
    history = as_json(ns, "gray", "history", "GID_H")
    assert [(op["kind"], op["state"]) for op in history] == [("promote", "SUCCEEDED")]
    assert set(history[0]["result"]["timings_s"]) == {"producers", "drain"}
    table = graymq(ns, "gray", "history", "GID_H").stdout
    assert "promote" in table and "SUCCEEDED" in table and "producers" in table
    entries = as_json(ns, "audit", "--group", "GID_H", "--limit", "50")
    orphan = next(e for e in entries if e["action"] == "set_orphan_policy")
    assert (orphan["before"], orphan["after"], orphan["reason"]) == (
        {"orphan_policy": "hold"}, {"orphan_policy": "adopt"}, "drill")
    assert len(as_json(ns, "audit", "--group", "GID_H", "--limit", "1")) == 1
    human = graymq(ns, "audit", "--group", "GID_H").stdout
    assert "set_orphan_policy" in human and '{"orphan_policy":"hold"} -> {"orphan_policy":"adopt"}' in human
    bad = graymq(ns, "audit", "--limit", "0", check=False)
    assert bad.returncode == 2 and "--limit must be 1 to 1000" in bad.stderr
