"""Pop consumption through the broker's gRPC endpoint, with the stock Python SDK's SimpleConsumer in its own
process: what graymq's producer sends is received intact and acked (the group's committed offset follows), a
message not acked comes again after its invisible time with the next attempt and, past the maximum attempts, is in
``%DLQ%GROUP``; ChangeInvisibleDuration keeps a message away longer; a forged receipt handle is refused, and a
queue pop consumers use refuses a graymq push consumer's lease. A group's FIFO and maximum attempts are the name
server's (``graymq group update``), as RocketMQ keeps them in the subscription group."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from graymq.broker_ext.groups.queue_leases import POP_CONSUMERS
from graymq.broker_ext.grpc_endpoint.settings import CONSUMER_MAX_ATTEMPTS
from graymq.client import Message, Producer
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.broker_client import BrokerClient
from graymq.protocol.record import MessageExt, iter_records
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from graymq.protocol.rocketmq_v2 import service_pb2 as v2s
from graymq.protocol.rocketmq_v2 import service_pb2_grpc
from tests.support.cli import graymq
from tests.support.cluster import Cluster
from tests.support.stock_sdk import StockSimpleConsumer

pytestmark = pytest.mark.integration

QUEUES, GRAY = 4, 0


def info(cluster: Cluster, key: str) -> str:
    ready = cluster.brokers["broker-a"].ready_info
    assert ready is not None
    return str(ready[key])


def send(cluster: Cluster, topic: str, messages: list[Message]) -> None:
    async def go() -> None:
        producer = Producer("GID_POP_PRODUCER", cluster.ns_url)
        await producer.start()
        try:
            for message in messages:
                await producer.send(message)
        finally:
            await producer.stop()

    asyncio.run(go())


def broker_call(cluster: Cluster, call: Any) -> Any:
    async def go() -> Any:
        client = BrokerClient(tls=False)
        try:
            return await call(client, info(cluster, "address"))
        finally:
            await client.close()

    return asyncio.run(go())


def committed(cluster: Cluster, group: str, topic: str) -> list[int]:
    async def query(client: BrokerClient, address: str) -> list[int]:
        return [await client.query_offset(address, group, topic, q) for q in range(QUEUES)]

    return list(broker_call(cluster, query))


def dead_letters(cluster: Cluster, group: str) -> list[MessageExt]:
    """The messages in ``%DLQ%group``."""
    async def pull(client: BrokerClient, address: str) -> list[MessageExt]:
        response = await client.pull(address, pb.PullRequest(
            consumer_group=group, topic=f"%DLQ%{group}", queue_id=0, queue_offset=0, max_msg_nums=32,
            sub_expression="*", client_id="dlq-reader", commit_offset=-1))
        return list(iter_records(response.records))

    return list(broker_call(cluster, pull))


def receive_all(consumer: StockSimpleConsumer, expected: int, *, ack: bool, invisible_s: int = 10,
                timeout: float = 30.0) -> list[dict[str, Any]]:
    received: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while len(received) < expected and time.monotonic() < deadline:
        received.extend(consumer.receive(32, invisible_s, ack=ack))
    return received


@pytest.fixture
def consumer_of(grpc_cluster: Cluster, tmp_path: Path) -> Iterator[Any]:
    consumers: list[StockSimpleConsumer] = []

    def make(group: str, topic: str) -> StockSimpleConsumer:
        consumer = StockSimpleConsumer(info(grpc_cluster, "grpc"), group, topic, tmp_path / group)
        consumers.append(consumer)
        assert "client_id" in consumer.started, consumer.started
        return consumer

    yield make
    for consumer in consumers:
        consumer.close()


def test_messages_of_graymq_are_received_intact_by_the_sdk_and_acks_move_the_committed_offset(
        grpc_cluster: Cluster, consumer_of: Any) -> None:
    topic, group = "POP_PLAIN", "GID_POP_PLAIN"
    grpc_cluster.create_topic(topic, QUEUES, GRAY)
    send(grpc_cluster, topic, [Message(topic, b"tagged", tags="TagA", keys=["order-1", "user-2"],
                                 properties={"region": "eu"}),
                         *(Message(topic, f"plain-{i}".encode()) for i in range(7))])
    consumer = consumer_of(group, topic)

    received = receive_all(consumer, 8, ack=True)
    assert sorted(m["body"] for m in received) == sorted(["tagged", *(f"plain-{i}" for i in range(7))])
    tagged = next(m for m in received if m["body"] == "tagged")
    assert tagged["tag"] == "TagA" and tagged["keys"] == ["order-1", "user-2"]
    assert tagged["properties"] == {"region": "eu"} and not tagged["corrupted"]  # the MD5 digest checks out
    assert {m["attempt"] for m in received} == {1}
    assert sum(committed(grpc_cluster, group, topic)) == 8  # every message acked: nothing left to consume
    assert consumer.receive(32, 10, ack=True) == []


def test_a_message_not_acked_comes_again_with_the_next_attempt_then_is_in_the_dead_letter_queue(
        grpc_cluster: Cluster, consumer_of: Any) -> None:
    topic, group = "POP_UNACKED", "GID_POP_UNACKED"
    grpc_cluster.create_topic(topic, QUEUES, GRAY)
    send(grpc_cluster, topic, [Message(topic, b"poison", keys=["poison-1"])])
    consumer = consumer_of(group, topic)

    attempts: list[int] = []
    deadline = time.monotonic() + 120
    while len(attempts) < CONSUMER_MAX_ATTEMPTS and time.monotonic() < deadline:
        attempts.extend(m["attempt"] for m in consumer.receive(32, 1, ack=False))  # 1 s invisible, never acked
    assert attempts == list(range(1, CONSUMER_MAX_ATTEMPTS + 1))
    time.sleep(1.2)
    assert consumer.receive(32, 1, ack=False) == []  # past the maximum: dead-lettered, not delivered

    dead = dead_letters(grpc_cluster, group)
    assert [m.body for m in dead] == [b"poison"] and dead[0].keys == ["poison-1"]
    assert dead[0].properties["RETRY_TOPIC"] == topic
    assert sum(committed(grpc_cluster, group, topic)) == 1


def test_change_invisible_duration_keeps_a_message_away_and_the_new_handle_acks_it(
        grpc_cluster: Cluster, consumer_of: Any) -> None:
    topic, group = "POP_SLOW", "GID_POP_SLOW"
    grpc_cluster.create_topic(topic, QUEUES, GRAY)
    send(grpc_cluster, topic, [Message(topic, b"slow")])
    consumer = consumer_of(group, topic)

    (message,) = receive_all(consumer, 1, ack=False, invisible_s=2)
    assert consumer.call({"change_invisible": message["message_id"], "invisible": 60}) == {
        "changed": message["message_id"]}
    time.sleep(2.5)  # the first invisible time is over
    assert consumer.receive(32, 2, ack=False) == []
    assert consumer.call({"ack": message["message_id"]}) == {"acked": message["message_id"]}
    assert sum(committed(grpc_cluster, group, topic)) == 1


def test_a_forged_receipt_handle_is_refused_and_a_queue_in_pop_use_refuses_a_push_consumers_lease(
        grpc_cluster: Cluster, consumer_of: Any) -> None:
    topic, group = "POP_GUARD", "GID_POP_GUARD"
    grpc_cluster.create_topic(topic, QUEUES, GRAY)
    send(grpc_cluster, topic, [Message(topic, b"guarded")])
    consumer = consumer_of(group, topic)
    assert len(receive_all(consumer, 1, ack=False, invisible_s=30)) == 1

    async def forged() -> tuple[v2s.AckMessageResponse, v2s.ChangeInvisibleDurationResponse]:
        async with grpc.aio.insecure_channel(info(grpc_cluster, "grpc")) as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            ack = await stub.AckMessage(v2s.AckMessageRequest(
                group=v2.Resource(name=group), topic=v2.Resource(name=topic),
                entries=[v2s.AckMessageEntry(message_id="m", receipt_handle="eyJnIjoiRyJ9.forged")]), timeout=10)
            change = v2s.ChangeInvisibleDurationRequest(group=v2.Resource(name=group),
                                                        topic=v2.Resource(name=topic), receipt_handle="x.y")
            change.invisible_duration.FromSeconds(5)
            return ack, await stub.ChangeInvisibleDuration(change, timeout=10)

    ack, change = asyncio.run(forged())
    assert ack.status.code == v2.INVALID_RECEIPT_HANDLE
    assert [e.status.code for e in ack.entries] == [v2.INVALID_RECEIPT_HANDLE]
    assert change.status.code == v2.INVALID_RECEIPT_HANDLE

    async def lock(client: BrokerClient, address: str) -> pb.LockQueuesResponse:
        return await client.lock_queues(address, group, "push-client", [(topic, q) for q in range(QUEUES)])

    answer = broker_call(grpc_cluster, lock)
    assert len(answer.held) == 1 and answer.held[0].client_id == POP_CONSUMERS


def test_a_fifo_consumer_gets_a_queues_next_message_only_once_the_one_before_is_acked(grpc_cluster: Cluster) -> None:
    topic, group, client_id = "POP_FIFO", "GID_POP_FIFO", "fifo-host@1@0@fifo"
    grpc_cluster.create_topic(topic, 1, GRAY)
    send(grpc_cluster, topic, [Message(topic, f"step-{i}".encode(), properties={"__SHARDINGKEY": "order-1"})
                         for i in range(3)])
    metadata = (("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"))

    async def run() -> list[list[v2.Message]]:
        async with grpc.aio.insecure_channel(info(grpc_cluster, "grpc")) as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            commands: asyncio.Queue[v2s.TelemetryCommand | None] = asyncio.Queue()
            settings = v2.Settings(client_type=v2.SIMPLE_CONSUMER, subscription=v2.Subscription(
                group=v2.Resource(name=group), fifo=True,
                subscriptions=[v2.SubscriptionEntry(topic=v2.Resource(name=topic))]))
            await commands.put(v2s.TelemetryCommand(settings=settings))

            async def outgoing() -> Any:
                while (command := await commands.get()) is not None:
                    yield command

            telemetry = stub.Telemetry(outgoing(), metadata=metadata)
            assert (await telemetry.read()).status.code == v2.OK
            async def receive() -> list[v2.Message]:
                request = v2s.ReceiveMessageRequest(group=v2.Resource(name=group), batch_size=8,
                                                    message_queue=v2.MessageQueue(topic=v2.Resource(name=topic)))
                request.invisible_duration.FromSeconds(30)
                request.long_polling_timeout.FromSeconds(1)
                answers = [r async for r in stub.ReceiveMessage(request, metadata=metadata, timeout=10)]
                return [r.message for r in answers if r.HasField("message")]

            async def ack(messages: list[v2.Message]) -> None:
                entries = [v2s.AckMessageEntry(message_id=m.system_properties.message_id,
                                               receipt_handle=m.system_properties.receipt_handle) for m in messages]
                answer = await stub.AckMessage(v2s.AckMessageRequest(
                    group=v2.Resource(name=group), topic=v2.Resource(name=topic), entries=entries),
                    metadata=metadata, timeout=10)
                assert answer.status.code == v2.OK, answer

            rounds = [await receive()]
            rounds.append(await receive())  # step-0 in flight: nothing more from its queue
            await ack(rounds[0])
            rounds.append(await receive())
            await ack(rounds[2])
            rounds.append(await receive())
            await commands.put(None)
            telemetry.cancel()
            return rounds

    rounds = asyncio.run(run())
    assert [[m.body.decode() for m in r] for r in rounds] == [["step-0"], [], ["step-1"], ["step-2"]]
    assert rounds[0][0].system_properties.message_group == "order-1"


def test_a_fifo_groups_consumer_gets_one_message_at_a_time_per_queue_in_order(
        grpc_cluster: Cluster, consumer_of: Any) -> None:
    """The group is FIFO on the name server (``graymq group update``); the SDK itself never says so."""
    topic, group = "POP_FIFO_GROUP", "GID_POP_FIFO_GROUP"
    grpc_cluster.create_topic(topic, 1, 0)
    updated = graymq(grpc_cluster.ns_url, "group", "update", group, "--fifo", "on", "--reason", "orders in order")
    assert "fifo on" in updated.stdout
    bodies = [f"step-{i}" for i in range(5)]
    send(grpc_cluster, topic, [Message(topic, body.encode()) for body in bodies])
    consumer = consumer_of(group, topic)

    batches: list[list[str]] = []
    deadline = time.monotonic() + 60
    while sum(map(len, batches)) < len(bodies) and time.monotonic() < deadline:
        batch = [m["body"] for m in consumer.receive(32, 10, ack=True)]
        if batch:
            batches.append(batch)
    assert batches == [[body] for body in bodies]  # a batch of 32 asked, one in flight at a time, in order


def test_the_groups_max_attempts_three_dead_letters_after_the_third_delivery_and_bad_values_are_refused(
        grpc_cluster: Cluster, consumer_of: Any) -> None:
    topic, group = "POP_ATTEMPTS_GROUP", "GID_POP_ATTEMPTS_GROUP"
    grpc_cluster.create_topic(topic, 2, 0)
    refused = graymq(grpc_cluster.ns_url, "group", "update", group, "--max-attempts", "0", check=False)
    assert refused.returncode != 0 and "--max-attempts 0 is out of range" in refused.stderr
    graymq(grpc_cluster.ns_url, "group", "update", group, "--max-attempts", "3")
    send(grpc_cluster, topic, [Message(topic, b"poison")])
    consumer = consumer_of(group, topic)

    attempts: list[int] = []
    deadline = time.monotonic() + 60
    while len(attempts) < 3 and time.monotonic() < deadline:
        attempts.extend(m["attempt"] for m in consumer.receive(32, 1, ack=False))  # 1 s invisible, never acked
    assert attempts == [1, 2, 3]
    time.sleep(1.2)
    assert consumer.receive(32, 1, ack=False) == []  # past the group's maximum: dead-lettered
    assert [m.body for m in dead_letters(grpc_cluster, group)] == [b"poison"]
