"""The stock RocketMQ 5 Python SDK's Producer against a broker's gRPC endpoint (``graymq broker --grpc-port``):
its messages are stored as graymq's own and read back by graymq's PullConsumer intact, the broker picks the
queue (a message group's messages share one, in order; a producer the name server makes gray sends to the gray
queues), and every RPC not served yet answers NOT_IMPLEMENTED at once."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import grpc
import pytest

from graymq.client import MessageExt
from graymq.core.queue_layout import gray_queue_ids
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from graymq.protocol.rocketmq_v2 import service_pb2 as v2s
from graymq.protocol.rocketmq_v2 import service_pb2_grpc
from tests.support.cli import wait_for
from tests.support.cluster import Cluster
from tests.support.stock_reads import stored_messages
from tests.support.stock_sdk import StockProducer, sdk_send

pytestmark = pytest.mark.integration

QUEUES, GRAY = 6, 2
GRAY_QUEUES = set(gray_queue_ids(QUEUES, GRAY))


def read_all(ns_url: str, topic: str, expected: int, timeout: float = 20.0) -> list[MessageExt]:
    """Every message of ``topic``, pulled queue by queue from offset 0 until ``expected`` are there."""
    return stored_messages(ns_url, topic, QUEUES, GRAY, expected, timeout=timeout)


def test_stock_producer_messages_are_read_by_graymq_with_body_tag_keys_and_properties(
        grpc_cluster: Cluster, grpc_endpoint: str, tmp_path: Path) -> None:
    topic = "GRPC_PLAIN"
    grpc_cluster.create_topic(topic, QUEUES, GRAY)
    sent: list[dict[str, Any]] = [
        {"body": "plain"},
        {"body": "tagged", "tag": "TagA"},
        {"body": "keyed", "tag": "TagB", "keys": ["order-17", "user-3"], "properties": {"region": "eu", "n": "1"}}]
    results = sdk_send(grpc_endpoint, topic, sent, tmp_path)
    assert all("message_id" in r for r in results), results

    stored = {m.body.decode(): m for m in read_all(grpc_cluster.ns_url, topic, len(sent))}
    assert set(stored) == {"plain", "tagged", "keyed"}
    assert [stored[s["body"]].msg_id for s in sent] == [r["message_id"] for r in results]
    assert stored["tagged"].tags == "TagA"
    assert stored["keyed"].tags == "TagB"
    assert sorted(stored["keyed"].keys) == ["order-17", "user-3"]  # the SDK keeps its keys in a set
    assert {k: stored["keyed"].properties[k] for k in ("region", "n")} == {"region": "eu", "n": "1"}
    # no gray rule names this producer: normal queues, no gray mark
    assert all(m.queue_id not in GRAY_QUEUES and not m.gray for m in stored.values())


def test_a_message_groups_messages_share_one_queue_in_send_order(
        grpc_cluster: Cluster, grpc_endpoint: str, tmp_path: Path) -> None:
    topic = "GRPC_FIFO"
    grpc_cluster.create_topic(topic, QUEUES, GRAY)
    sent = [{"body": f"{group}-{i}", "group": group} for i in range(5) for group in ("order-1", "order-2", "order-3")]
    results = sdk_send(grpc_endpoint, topic, sent, tmp_path)
    assert all("message_id" in r for r in results), results

    stored = read_all(grpc_cluster.ns_url, topic, len(sent))
    for group in ("order-1", "order-2", "order-3"):
        mine = [m for m in stored if m.properties.get("__SHARDINGKEY") == group]
        assert len({m.queue_id for m in mine}) == 1, f"{group} spread over queues {[m.queue_id for m in mine]}"
        assert mine[0].queue_id not in GRAY_QUEUES
        assert [m.body.decode() for m in sorted(mine, key=lambda m: m.queue_offset)] == [
            f"{group}-{i}" for i in range(5)]


def test_a_stock_producer_a_gray_rule_matches_by_host_sends_to_the_gray_queues(
        grpc_cluster: Cluster, grpc_endpoint: str, tmp_path: Path) -> None:
    topic = "GRPC_GRAY"  # a stock producer's producer group is named after the topic, as in RocketMQ's proxy
    grpc_cluster.create_topic(topic, QUEUES, GRAY)
    grpc_cluster.ns_call(lambda ns: ns.set_switch(topic, True))
    grpc_cluster.ns_call(lambda ns: ns.add_rule(topic, {"host": socket.gethostname()}, True))
    results = sdk_send(grpc_endpoint, topic, [{"body": f"v2-{i}"} for i in range(6)], tmp_path)
    assert all("message_id" in r for r in results), results

    stored = read_all(grpc_cluster.ns_url, topic, 6)
    assert sorted(m.body.decode() for m in stored) == [f"v2-{i}" for i in range(6)]
    assert all(m.queue_id in GRAY_QUEUES and m.gray for m in stored), [(m.queue_id, m.gray) for m in stored]


def test_rpcs_not_served_yet_answer_not_implemented_at_once(grpc_cluster: Cluster, grpc_endpoint: str) -> None:
    async def call() -> None:
        async with grpc.aio.insecure_channel(grpc_endpoint) as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            ended = await stub.EndTransaction(v2s.EndTransactionRequest(), timeout=10)
            assert ended.status.code == v2.NOT_IMPLEMENTED and "EndTransaction" in ended.status.message
            pulled = [r async for r in stub.PullMessage(v2s.PullMessageRequest(), timeout=10)]
            assert [r.status.code for r in pulled] == [v2.NOT_IMPLEMENTED]

    asyncio.run(call())


def producer_view(cluster: Cluster, group: str, client_id: str) -> dict[str, Any] | None:
    answer = cluster.ns_call(lambda ns: ns.group_clients(group, "producer"))
    return next((c.to_json() for c in answer.clients if c.client_id == client_id), None)


def test_a_running_stock_producer_is_a_client_of_its_topics_producer_group_and_a_flip_moves_its_sends(
        grpc_cluster: Cluster, grpc_endpoint: str, tmp_path: Path) -> None:
    topic = "GRPC_FLIP"
    grpc_cluster.create_topic(topic, QUEUES, GRAY)
    grpc_cluster.ns_call(lambda ns: ns.set_switch(topic, True))
    grpc_cluster.ns_call(lambda ns: ns.add_rule(topic, {"host": socket.gethostname()}, True))
    steps: list[dict[str, Any]] = [*({"body": f"before-{i}"} for i in range(3)), {"pause": True},
                                   *({"body": f"after-{i}"} for i in range(3))]
    producer = StockProducer(grpc_endpoint, topic, steps, tmp_path)
    try:
        client_id = producer.next()["client_id"]
        assert all("message_id" in producer.next() for _ in range(3))
        assert producer.next() == {"paused": True}
        view = producer_view(grpc_cluster, topic, client_id)  # the flag it sends with, reported before its first send
        assert view is not None and view["gray"] and view["desired_gray"]
        assert view["labels"] == {"host": socket.gethostname(), "language": "python", "protocol": "rocketmq5"}

        grpc_cluster.ns_call(lambda ns: ns.set_flag(topic, client_id, False, reason="v2 is normal now"))
        wait_for(lambda: not (producer_view(grpc_cluster, topic, client_id) or {"gray": True})["gray"], 20,
                 "the broker to apply and report the stock producer's normal flag")
        producer.resume()
        assert all("message_id" in producer.next() for _ in range(3))
        assert producer.wait() == 0
    finally:
        producer.kill()
    wait_for(lambda: producer_view(grpc_cluster, topic, client_id) is None, 20,
             "the stock producer to leave its group at shutdown")

    stored = {m.body.decode(): m for m in read_all(grpc_cluster.ns_url, topic, 6)}
    assert all(stored[f"before-{i}"].queue_id in GRAY_QUEUES and stored[f"before-{i}"].gray for i in range(3))
    assert all(stored[f"after-{i}"].queue_id not in GRAY_QUEUES and not stored[f"after-{i}"].gray for i in range(3))


def test_a_body_over_the_limit_is_refused_with_its_size_and_a_huge_request_before_it_is_read(
        grpc_cluster: Cluster, grpc_endpoint: str) -> None:
    limit = 4 << 20  # publishing.max_body_size the broker gives stock clients

    async def send(size: int) -> v2s.SendMessageResponse:
        async with grpc.aio.insecure_channel(grpc_endpoint) as channel:
            properties = v2.SystemProperties(message_id=f"01BIG{size}", message_type=v2.NORMAL)
            message = v2.Message(topic=v2.Resource(name="GRPC_BIG"), body=b"x" * size, system_properties=properties)
            return await service_pb2_grpc.MessagingServiceStub(channel).SendMessage(
                v2s.SendMessageRequest(messages=[message]), timeout=10)

    grpc_cluster.create_topic("GRPC_BIG", QUEUES, GRAY)
    too_large = asyncio.run(send(limit + 1)).status
    assert too_large.code == v2.MESSAGE_BODY_TOO_LARGE and f"{limit + 1} bytes" in too_large.message
    with pytest.raises(grpc.aio.AioRpcError) as huge:
        asyncio.run(send(2 * limit))
    assert huge.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert read_all(grpc_cluster.ns_url, "GRPC_BIG", 1, timeout=0) == []


def test_a_client_that_only_sends_is_unregistered_after_the_client_expiry(
        grpc_cluster: Cluster, grpc_endpoint: str) -> None:
    topic, client_id = "GRPC_PLAIN", "raw-sender@1@0@x"

    async def send() -> v2s.SendMessageResponse:
        async with grpc.aio.insecure_channel(grpc_endpoint) as channel:
            properties = v2.SystemProperties(message_id="01RAW", message_type=v2.NORMAL)
            message = v2.Message(topic=v2.Resource(name=topic), body=b"raw", system_properties=properties)
            return await service_pb2_grpc.MessagingServiceStub(channel).SendMessage(
                v2s.SendMessageRequest(messages=[message]), metadata=[("x-mq-client-id", client_id)], timeout=10)

    grpc_cluster.create_topic(topic, QUEUES, GRAY)
    assert asyncio.run(send()).status.code == v2.OK
    assert producer_view(grpc_cluster, topic, client_id) is not None  # registered by its send, no telemetry stream
    wait_for(lambda: producer_view(grpc_cluster, topic, client_id) is None, 25,
             "the broker to unregister a stock producer without a stream once idle for the client expiry (10 s)")
