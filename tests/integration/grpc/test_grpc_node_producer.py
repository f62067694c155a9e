"""The stock RocketMQ 5 Node.js SDK's Producer (``rocketmq-client-nodejs`` from npm, in a process of its own)
against a broker's gRPC endpoint: normal and FIFO messages with tag, keys and properties reach ``graymq consume``
intact; a producer whose host (``unshare --uts``: a pod's name) the gray rule ``host=orders-v2-*`` matches sends to
the gray queues, another host's to the normal ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from graymq.core.queue_layout import gray_queue_ids
from tests.support.cli import graymq
from tests.support.cluster import Cluster
from tests.support.node_sdk import node_sdk
from tests.support.stock_reads import stored_messages

pytestmark = pytest.mark.integration

QUEUES, GRAY = 6, 2


def consumed(cluster: Cluster, topic: str, count: int) -> dict[str, dict[str, Any]]:
    """What ``graymq consume --json`` prints for ``topic`` from its first message, by body."""
    done = graymq(cluster.ns_url, "consume", topic, "--group", f"GID_{topic}", "--from", "first", "--max",
                  str(count), "--idle-exit", "15", "--json", timeout=60)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {str(line["body"]): line for line in lines}


def test_node_producer_messages_reach_graymq_consume_with_tag_keys_properties_and_group_order(
        grpc_cluster: Cluster, grpc_endpoint: str, node_sdk_dir: Path, tmp_path: Path) -> None:
    topic = "NODE_PLAIN"
    grpc_cluster.create_topic(topic, QUEUES, GRAY)
    messages: list[dict[str, Any]] = [{"body": "plain"}, {"body": "tagged", "tag": "TagA"},
                {"body": "keyed", "tag": "TagB", "keys": ["order-17", "user-3"],
                 "properties": {"region": "eu", "n": "1"}},
                *({"body": f"{group}-{i}", "group": group} for i in range(4) for group in ("order-1", "order-2"))]
    sent = node_sdk({"endpoint": grpc_endpoint, "topic": topic, "messages": messages}, tmp_path, sdk=node_sdk_dir)
    assert len(sent) == len(messages) and all("message_id" in r for r in sent), sent

    got = consumed(grpc_cluster, topic, len(messages))
    assert set(got) == {m["body"] for m in messages}
    assert [got[m["body"]]["msg_id"] for m in messages] == [r["message_id"] for r in sent]
    assert got["tagged"]["tags"] == "TagA" and got["keyed"]["tags"] == "TagB"
    assert sorted(got["keyed"]["keys"]) == ["order-17", "user-3"]
    assert not any(line["gray"] for line in got.values())

    stored = {m.body.decode(): m for m in stored_messages(grpc_cluster.ns_url, topic, QUEUES, GRAY, len(messages))}
    assert {k: stored["keyed"].properties[k] for k in ("region", "n")} == {"region": "eu", "n": "1"}
    for group in ("order-1", "order-2"):
        mine = sorted((m for m in stored.values() if m.properties.get("__SHARDINGKEY") == group),
                      key=lambda m: m.queue_offset)
        assert len({m.queue_id for m in mine}) == 1, f"{group} spread over {[m.queue_id for m in mine]}"
        assert [m.body.decode() for m in mine] == [f"{group}-{i}" for i in range(4)]


def test_a_node_producer_on_an_orders_v2_pod_sends_to_the_gray_queues_by_a_glob_host_rule(
        grpc_cluster: Cluster, grpc_endpoint: str, node_sdk_dir: Path, tmp_path: Path) -> None:
    topic = "NODE_GRAY"  # a stock producer's producer group is named after its topic
    grpc_cluster.create_topic(topic, QUEUES, GRAY)
    grpc_cluster.ns_call(lambda ns: ns.set_switch(topic, True))
    grpc_cluster.ns_call(lambda ns: ns.add_rule(topic, {"host": "orders-v2-*"}, True))
    spec = {"endpoint": grpc_endpoint, "topic": topic, "messages": [{"body": f"m-{i}"} for i in range(4)]}
    v2 = node_sdk(spec, tmp_path / "v2", sdk=node_sdk_dir, hostname="orders-v2-7f9c")
    v1 = node_sdk({**spec, "messages": [{"body": f"n-{i}"} for i in range(4)]}, tmp_path / "v1", sdk=node_sdk_dir,
                  hostname="orders-v1-5d2a")
    assert all("message_id" in r for r in v1 + v2), v1 + v2

    gray_ids = set(gray_queue_ids(QUEUES, GRAY))
    stored = stored_messages(grpc_cluster.ns_url, topic, QUEUES, GRAY, 8)
    assert sorted(m.body.decode() for m in stored) == [*(f"m-{i}" for i in range(4)), *(f"n-{i}" for i in range(4))]
    assert all((m.queue_id in gray_ids) == m.body.startswith(b"m-") == m.gray for m in stored), \
        [(m.body, m.queue_id, m.gray) for m in stored]
