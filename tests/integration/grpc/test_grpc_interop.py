"""Interop on one broker: what graymq's own producers send (``graymq produce`` with tag and keys, the client
library with properties and a sharding key) is received by the stock SDKs' simple consumers — Node.js and Python,
each in its own process and its own group — with body, tag, keys and properties intact and a digest each SDK
verifies."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from graymq.client import Message, Producer
from tests.support.cli import produce
from tests.support.cluster import Cluster
from tests.support.node_sdk import node_sdk
from tests.support.stock_sdk import StockSimpleConsumer

pytestmark = pytest.mark.integration

TOPIC = "INTEROP"


def send_with_properties(ns_url: str) -> None:
    async def send() -> None:
        producer = Producer("GID_INTEROP_PRODUCER", ns_url)
        await producer.start()
        try:
            await producer.send(Message(TOPIC, b"with-properties", tags="TagP", keys=["order-9"],
                                        properties={"region": "eu", "trace": "t-1"}))
            await producer.send(Message(TOPIC, b"grouped", properties={"__SHARDINGKEY": "order-9"}))
        finally:
            await producer.stop()

    asyncio.run(send())


@pytest.fixture(scope="module")
def sent(grpc_cluster: Cluster) -> dict[str, str]:
    """Body -> message id of what graymq's producers sent."""
    grpc_cluster.create_topic(TOPIC, 4, 2)
    by_cli = produce(grpc_cluster.ns_url, TOPIC, "--body", "from-cli", "--tag", "TagA", "--key", "k-1", "--key", "k-2")
    by_cli += produce(grpc_cluster.ns_url, TOPIC, "--body", "plain")
    send_with_properties(grpc_cluster.ns_url)
    return {"from-cli": by_cli[0]["msg_id"], "plain": by_cli[1]["msg_id"]}


def check_intact(received: list[dict[str, Any]], sent: dict[str, str]) -> None:
    by_body = {line.get("body"): line for line in received}
    assert set(by_body) == {*sent, "with-properties", "grouped"}, received
    assert all(not line["corrupted"] for line in received), received
    assert {body: by_body[body]["message_id"] for body in sent} == sent
    assert by_body["from-cli"]["tag"] == "TagA" and sorted(by_body["from-cli"]["keys"]) == ["k-1", "k-2"]
    assert not by_body["plain"]["tag"] and not by_body["plain"]["keys"]
    tagged = by_body["with-properties"]
    assert tagged["tag"] == "TagP" and tagged["keys"] == ["order-9"]
    assert {k: tagged["properties"].get(k) for k in ("region", "trace")} == {"region": "eu", "trace": "t-1"}
    assert by_body["grouped"]["group"] == "order-9"


def test_the_node_sdk_receives_what_graymq_sent_intact(grpc_endpoint: str, sent: dict[str, str], node_sdk_dir: Path,
                                                       tmp_path: Path) -> None:
    spec = {"endpoint": grpc_endpoint, "topic": TOPIC, "mode": "receive", "group": "GID_INTEROP_NODE",
            "expect": 4, "wait_s": 30}
    check_intact(node_sdk(spec, tmp_path, sdk=node_sdk_dir), sent)


def test_the_python_sdk_receives_what_graymq_sent_intact(grpc_endpoint: str, sent: dict[str, str],
                                                         tmp_path: Path) -> None:
    consumer = StockSimpleConsumer(grpc_endpoint, "GID_INTEROP_PYTHON", TOPIC, tmp_path)
    received: list[dict[str, Any]] = []
    try:
        assert "client_id" in consumer.started, consumer.started
        deadline = time.monotonic() + 30
        while len(received) < 4 and time.monotonic() < deadline:
            received += consumer.receive(ack=True)  # each a long poll of up to 2 s
    finally:
        consumer.close()
    check_intact(received, sent)
