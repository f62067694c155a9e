"""The stock Python SDK's PushConsumer on the broker's gRPC endpoint. Its receives ask for ``auto_renew`` and name
no invisible time: the broker hands each message out for its own invisible time (4 s here) and renews it while the
client is connected.

Two push consumers in the pods of v1 and v2 (rule ``host=orders-v2-*``) receive every message of the topic once,
each from its side; a message a push consumer holds longer than many invisible times is not delivered again, its ack
after the renewals goes through, and one it never finishes comes back to the group's other consumer (next attempt)
once its process is gone and the renewals stopped."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graymq.nameserver_api.client import NameServerClient
from tests.support.cli import gray_status, produce, wait_for
from tests.support.cluster import Cluster, module_processes
from tests.support.stock_sdk import StockPushConsumer, sdk_log

pytestmark = pytest.mark.integration

INVISIBLE_S = 4.0  # the broker's invisible time of an auto-renewed delivery, renewed when half of it has passed
QUEUES, GRAY = 6, 2
V1_HOST, V2_HOST = "orders-v1-6b7c9", "orders-v2-9d4e1"
ACK_FAILED = "ack or nack raise exception"  # what the SDK logs when an ack of its is refused


@pytest.fixture(scope="module")
def push_cluster(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with module_processes(tmp_path_factory.mktemp("push")) as start:
        cluster = Cluster(start, pg_url, tmp_path_factory.mktemp("push_stores"))
        cluster.start_nameserver()
        cluster.add_broker("broker-a", "--grpc-port", "0",
                           GRAYMQ_BROKER_GRPC_AUTO_RENEW_INVISIBLE_MS=str(int(INVISIBLE_S * 1000)))
        yield cluster


@pytest.fixture(scope="module")
def endpoint(push_cluster: Cluster) -> str:
    info = push_cluster.brokers["broker-a"].ready_info
    assert info is not None
    return str(info["grpc"])


def listed(ns_url: str, group: str) -> dict[str, dict[str, Any]]:
    return {c["client_id"]: c for c in gray_status(ns_url, group)["clients"] if not c["stale"]}


def consumers_closed(*consumers: StockPushConsumer) -> None:
    for consumer in consumers:
        consumer.close()


def test_push_consumers_receive_every_message_once_each_from_its_side(push_cluster: Cluster, endpoint: str,
                                                                      tmp_path: Path) -> None:
    topic, group = "PUSH_SPLIT", "GID_PUSH_SPLIT"
    push_cluster.create_topic(topic, QUEUES, GRAY)

    async def switch_and_rule(ns: NameServerClient) -> None:
        await ns.set_switch(group, True)
        await ns.add_rule(group, {"host": "orders-v2-*"}, True)

    push_cluster.ns_call(switch_and_rule)
    v1 = StockPushConsumer(endpoint, group, topic, tmp_path / "v1", host=V1_HOST)
    v2 = StockPushConsumer(endpoint, group, topic, tmp_path / "v2", host=V2_HOST)
    try:
        ids = {v1.started["client_id"]: "v1", v2.started["client_id"]: "v2"}
        wait_for(lambda: set(listed(push_cluster.ns_url, group)) == set(ids), 60, "both push consumers listed")
        assert {ids[c]: info["gray"] for c, info in listed(push_cluster.ns_url, group).items()} == {
            "v1": False, "v2": True}

        normal = {r["msg_id"] for r in produce(push_cluster.ns_url, topic, "--count", "20", "--size", "16")}
        gray = {r["msg_id"] for r in produce(push_cluster.ns_url, topic, "--gray", "--count", "20", "--size", "16")}
        wait_for(lambda: len(v1.received()) >= 20 and len(v2.received()) >= 20, 60, "the 40 messages received")
        time.sleep(2 * INVISIBLE_S)  # past their invisible time: an unacked one would come again
        assert sorted(line["message_id"] for line in v1.received()) == sorted(normal)
        assert sorted(line["message_id"] for line in v2.received()) == sorted(gray)
        assert {(line["lane"], line["attempt"]) for line in v1.received()} == {(None, 1)}
        assert {(line["lane"], line["attempt"]) for line in v2.received()} == {("gray", 1)}
    finally:
        consumers_closed(v1, v2)
    for side in ("v1", "v2"):
        assert ACK_FAILED not in sdk_log(tmp_path / side)


def test_a_held_message_stays_invisible_while_its_push_consumer_lives_and_comes_back_once_it_is_gone(
        push_cluster: Cluster, endpoint: str, tmp_path: Path) -> None:
    topic, group = "PUSH_RENEW", "GID_PUSH_RENEW"
    push_cluster.create_topic(topic, 2, 0)
    holding = StockPushConsumer(endpoint, group, topic, tmp_path / "holding", hold={"slow": 3 * INVISIBLE_S},
                                block=("stuck",))
    other: StockPushConsumer | None = None
    try:
        for body in ("slow", "stuck"):
            produce(push_cluster.ns_url, topic, "--body", body)
        wait_for(lambda: {"consumed": "slow"} in holding.lines(), 60, "the slow message consumed after its hold")
        # held three invisible times: renewed meanwhile, so neither came again, and the ack after them was taken
        assert sorted((line["received"], line["attempt"]) for line in holding.received()) == [
            ("slow", 1), ("stuck", 1)]

        other = StockPushConsumer(endpoint, group, topic, tmp_path / "other")
        time.sleep(2 * INVISIBLE_S)
        assert other.received() == []  # the stuck one is still renewed for the consumer holding it
        holding.kill()  # gone: its telemetry stream closes, the renewals stop
        wait_for(lambda: other is not None and bool(other.received()), 60, "the stuck message to come back")
        time.sleep(2 * INVISIBLE_S)
        assert [(line["received"], line["attempt"]) for line in other.received()] == [("stuck", 2)]
        assert len(holding.received()) == 2
    finally:
        consumers_closed(holding, *([other] if other is not None else []))
    assert ACK_FAILED not in sdk_log(tmp_path / "holding")
