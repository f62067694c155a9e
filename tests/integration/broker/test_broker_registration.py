"""A broker's registration with the name server: a config it cannot apply is logged once, deletions reach it
(also when it was down at the time) and drop the topic and the deleted group's offsets."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from graymq.protocol.broker_client import BrokerClient
from graymq.protocol.errors import TopicNotExistError
from tests.support.broker import run, send
from tests.support.cli import wait_for

pytestmark = pytest.mark.integration


def brokers(ns_url: str) -> dict[str, dict[str, Any]]:
    return {b["broker_name"]: b for b in httpx.get(f"{ns_url}/v1/brokers", timeout=5).json()}


def wait_registrations(ns_url: str, broker: str, count: int) -> None:
    """Until the broker has registered ``count`` more times."""
    seen = {brokers(ns_url)[broker]["last_heartbeat"]}

    def registered() -> bool:
        seen.add(brokers(ns_url)[broker]["last_heartbeat"])
        return len(seen) > count

    wait_for(registered, 30, f"{count} registrations of {broker}")


def test_a_topic_config_the_broker_cannot_apply_is_logged_once(cluster) -> None:
    config = cluster.root / "broker-a" / "config"
    config.mkdir(parents=True)
    (config / "topics.json").write_text(json.dumps({"topics": [
        {"topic": "T_SHRINK", "queue_nums": 8, "gray_queue_nums": 2, "perm": 6, "order": False}]}))
    cluster.ns_call(lambda ns: ns.put_topic("T_SHRINK", 4, 2))  # before the broker ever reported its 8 queues
    broker = cluster.add_broker("broker-a")
    wait_registrations(cluster.ns_url, "broker-a", 5)
    assert broker.output.count("cannot shrink from 8 to 4 queues") == 1, broker.output


def test_a_deleted_topic_and_group_are_dropped_by_a_broker_that_was_down_and_stay_deleted(cluster) -> None:
    broker = cluster.add_broker("broker-a")
    cluster.create_topic("T_GONE", 4, 0)
    cluster.create_topic("T_KEPT", 4, 0)

    async def commit_offsets(client: BrokerClient) -> None:
        for topic in ("T_GONE", "T_KEPT"):  # offsets are committed within [min, max]: messages first
            for i in range(7):
                await send(client, broker.address, topic, 0, b"m%d" % i)
            await client.update_offset(broker.address, "G_KEPT", topic, 0, 5)
        await client.update_offset(broker.address, "G_GONE", "T_KEPT", 0, 7)

    run(commit_offsets)
    broker.terminate()
    cluster.ns_call(lambda ns: ns.request("PUT", "/v1/groups/G_GONE/switch", json={"enabled": True}, admin=True))
    cluster.ns_call(lambda ns: ns.delete_topic("T_GONE"))
    cluster.ns_call(lambda ns: ns.delete_group("G_GONE"))
    broker = cluster.add_broker("broker-a")  # same store, behind on deletions
    wait_for(lambda: set(brokers(cluster.ns_url)["broker-a"]["topics"]) == {"T_KEPT"}, 30,
             "the broker to report only the topic left")
    wait_registrations(cluster.ns_url, "broker-a", 2)
    assert "T_GONE" not in {t["topic"] for t in httpx.get(f"{cluster.ns_url}/v1/topics", timeout=5).json()}
    assert "topic T_GONE deleted by the name server" in broker.output

    async def offsets(client: BrokerClient) -> tuple[int, int, int]:
        with pytest.raises(TopicNotExistError):
            await client.max_offset(broker.address, "T_GONE", 0)
        return (await client.query_offset(broker.address, "G_KEPT", "T_GONE", 0),
                await client.query_offset(broker.address, "G_KEPT", "T_KEPT", 0),
                await client.query_offset(broker.address, "G_GONE", "T_KEPT", 0))

    assert run(offsets) == (-1, 5, -1)
    applied = json.loads((cluster.root / "broker-a" / "config" / "deletions_applied.json").read_text())
    assert applied["deletions_applied"] >= 2
