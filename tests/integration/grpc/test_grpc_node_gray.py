"""Node.js SDK clients as the pods of two Deployments (``unshare --uts``: host names ``orders-v1-*`` and
``orders-v2-*``) with one rule ``host=orders-v2-*`` on the producer group and on the consumer group: the v2
producer's messages reach the v2 consumer only, the v1 producer's the v1 consumer only — the split decided by the
broker, the SDK unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cluster import Cluster
from tests.support.node_sdk import node_sdk

pytestmark = pytest.mark.integration

TOPIC, GROUP = "NODE_SPLIT", "GID_NODE_SPLIT"


def gray_v2_pods(cluster: Cluster, group: str) -> None:
    cluster.ns_call(lambda ns: ns.set_switch(group, True))
    cluster.ns_call(lambda ns: ns.add_rule(group, {"host": "orders-v2-*"}, True))


def test_v2_pods_messages_reach_the_v2_consumer_only_and_v1_pods_the_v1_consumer(
        grpc_cluster: Cluster, grpc_endpoint: str, node_sdk_dir: Path, tmp_path: Path) -> None:
    grpc_cluster.create_topic(TOPIC, 6, 2)
    for group in (TOPIC, GROUP):  # a stock producer's group is named after its topic
        gray_v2_pods(grpc_cluster, group)

    def run(spec: dict[str, object], pod: str) -> list[dict[str, object]]:
        return node_sdk({"endpoint": grpc_endpoint, "topic": TOPIC, **spec}, tmp_path / pod, sdk=node_sdk_dir,
                        hostname=pod)

    for version in ("v1", "v2"):
        sent = run({"messages": [{"body": f"{version}-{i}"} for i in range(6)]}, f"orders-{version}-5d8f-p")
        assert all("message_id" in r for r in sent), sent
    for version in ("v1", "v2"):  # each collects all it can get for a few seconds: a leak would show
        got = run({"mode": "receive", "group": GROUP, "expect": 12, "wait_s": 5}, f"orders-{version}-5d8f-c")
        assert sorted(str(m["body"]) for m in got) == [f"{version}-{i}" for i in range(6)], (version, got)
