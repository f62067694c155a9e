"""A group's FIFO and maximum attempts are the name server's (``graymq group update``), as RocketMQ keeps them in
the subscription group: the stock Python SDK's SimpleConsumer of a FIFO group gets one message at a time per queue,
in order; with max attempts 3 an unacked message is delivered three times, then it is in ``%DLQ%GROUP``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graymq.client import Message, Producer
from graymq.client.broker_client import BrokerClient
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.record import iter_records
from tests.support.cli import graymq
from tests.support.cluster import Cluster
from tests.support.stock_sdk import StockSimpleConsumer

pytestmark = pytest.mark.integration


def broker_info(cluster: Cluster, key: str) -> str:
    ready = cluster.brokers["broker-a"].ready_info
    assert ready is not None
    return str(ready[key])


def send(cluster: Cluster, topic: str, bodies: list[str]) -> None:
    async def go() -> None:
        producer = Producer("GID_POP_GROUP_PRODUCER", cluster.ns_url)
        await producer.start()
        try:
            for body in bodies:
                await producer.send(Message(topic, body.encode()))
        finally:
            await producer.stop()

    asyncio.run(go())


@pytest.fixture
def consumer_of(grpc_cluster: Cluster, tmp_path: Path) -> Iterator[Any]:
    consumers: list[StockSimpleConsumer] = []

    def make(group: str, topic: str) -> StockSimpleConsumer:
        consumer = StockSimpleConsumer(broker_info(grpc_cluster, "grpc"), group, topic, tmp_path / group)
        consumers.append(consumer)
        assert "client_id" in consumer.started, consumer.started
        return consumer

    yield make
    for consumer in consumers:
        consumer.close()


def test_a_fifo_groups_consumer_gets_one_message_at_a_time_per_queue_in_order(
        grpc_cluster: Cluster, consumer_of: Any) -> None:
    topic, group = "POP_FIFO_GROUP", "GID_POP_FIFO_GROUP"
    grpc_cluster.create_topic(topic, 1, 0)
    updated = graymq(grpc_cluster.ns_url, "group", "update", group, "--fifo", "on", "--reason", "orders in order")
    assert "fifo on" in updated.stdout
    bodies = [f"step-{i}" for i in range(5)]
    send(grpc_cluster, topic, bodies)
    consumer = consumer_of(group, topic)

    batches: list[list[str]] = []
    deadline = time.monotonic() + 60
    while sum(map(len, batches)) < len(bodies) and time.monotonic() < deadline:
        batch = [m["body"] for m in consumer.receive(32, 10, ack=True)]
        if batch:
            batches.append(batch)
    assert batches == [[body] for body in bodies]  # a batch of 32 asked, one in flight at a time, in order


def test_max_attempts_three_dead_letters_after_the_third_delivery_and_bad_values_are_refused(
        grpc_cluster: Cluster, consumer_of: Any) -> None:
    topic, group = "POP_ATTEMPTS_GROUP", "GID_POP_ATTEMPTS_GROUP"
    grpc_cluster.create_topic(topic, 2, 0)
    refused = graymq(grpc_cluster.ns_url, "group", "update", group, "--max-attempts", "0", check=False)
    assert refused.returncode != 0 and "--max-attempts 0 is out of range" in refused.stderr
    graymq(grpc_cluster.ns_url, "group", "update", group, "--max-attempts", "3")
    send(grpc_cluster, topic, ["poison"])
    consumer = consumer_of(group, topic)

    attempts: list[int] = []
    deadline = time.monotonic() + 60
    while len(attempts) < 3 and time.monotonic() < deadline:
        attempts.extend(m["attempt"] for m in consumer.receive(32, 1, ack=False))  # 1 s invisible, never acked
    assert attempts == [1, 2, 3]
    time.sleep(1.2)
    assert consumer.receive(32, 1, ack=False) == []  # past the group's maximum: dead-lettered

    async def pull_dlq() -> list[bytes]:
        client = BrokerClient(tls=False)
        try:
            response = await client.pull(broker_info(grpc_cluster, "address"), pb.PullRequest(
                consumer_group=group, topic=f"%DLQ%{group}", queue_id=0, queue_offset=0, max_msg_nums=32,
                sub_expression="*", client_id="dlq-reader", commit_offset=-1))
        finally:
            await client.close()
        return [m.body for m in iter_records(response.records)]

    assert asyncio.run(pull_dlq()) == [b"poison"]
