"""Stock consumers in a gray release, decided on the broker: a consumer talking RocketMQ 5's gRPC protocol (a
telemetry stream with its settings, as the SDKs open one) is a client of its group in the name server (role
``consumer``, ``protocol: rocketmq5``, its host as a label for the rules), QueryAssignment gives a gray one the gray
queues and a normal one the others, and a promote makes the gray one drain the gray queues before it turns normal."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from graymq.client import PullConsumer
from graymq.client.message import MessageQueue
from graymq.protocol.gray import gray_queue_ids
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from graymq.protocol.rocketmq_v2 import service_pb2 as v2s
from graymq.protocol.rocketmq_v2 import service_pb2_grpc
from tests.support.cli import gray_status, graymq, produce
from tests.support.cluster import Cluster, module_processes

pytestmark = pytest.mark.integration

QUEUES, GRAY = 6, 2
GRAY_QUEUES = set(gray_queue_ids(QUEUES, GRAY))
NORMAL_QUEUES = set(range(QUEUES)) - GRAY_QUEUES


@pytest.fixture(scope="module")
def shared(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with module_processes(tmp_path_factory.mktemp("grpc_gray")) as start:
        cluster = Cluster(start, pg_url, tmp_path_factory.mktemp("grpc_gray_stores"))
        cluster.start_nameserver()
        cluster.add_broker("broker-a", "--grpc-port", "0")
        yield cluster


def grpc_address(cluster: Cluster) -> str:
    info = cluster.brokers["broker-a"].ready_info
    assert info is not None
    return str(info["grpc"])


class RawStockConsumer:
    """A simple consumer as a stock SDK talks to the broker: a telemetry stream carrying its settings, open for its
    life, and QueryAssignment."""

    def __init__(self, address: str, client_id: str, group: str, topic: str) -> None:
        self.client_id, self.group, self.topic = client_id, group, topic
        self.channel = grpc.aio.insecure_channel(address)
        self.stub = service_pb2_grpc.MessagingServiceStub(self.channel)
        self.metadata = (("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"))
        self._closed = asyncio.Event()
        self._stream: Any = None

    async def _commands(self) -> AsyncIterator[v2s.TelemetryCommand]:
        subscription = v2.Subscription(group=v2.Resource(name=self.group), subscriptions=[v2.SubscriptionEntry(
            topic=v2.Resource(name=self.topic), expression=v2.FilterExpression(type=v2.TAG, expression="*"))])
        yield v2s.TelemetryCommand(settings=v2.Settings(client_type=v2.SIMPLE_CONSUMER, subscription=subscription))
        await self._closed.wait()

    async def open(self) -> v2s.TelemetryCommand:
        self._stream = self.stub.Telemetry(self._commands(), metadata=self.metadata)
        return await self._stream.read()

    async def assigned(self) -> set[int]:
        answer = await self.stub.QueryAssignment(v2s.QueryAssignmentRequest(
            topic=v2.Resource(name=self.topic), group=v2.Resource(name=self.group)), metadata=self.metadata,
            timeout=10)
        assert answer.status.code == v2.OK, answer.status
        return {a.message_queue.id for a in answer.assignments}

    async def close(self) -> None:
        self._closed.set()
        await self.channel.close()


def clients_of(ns_url: str, group: str) -> dict[str, dict[str, Any]]:
    return {c["client_id"]: c for c in gray_status(ns_url, group)["clients"] if not c["stale"]}


async def eventually(check: Any, what: str, timeout: float = 30.0) -> Any:
    """Poll ``check`` (a blocking call, run in a thread) until it returns something true; that value."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await asyncio.to_thread(check)
        if value:
            return value
        assert asyncio.get_running_loop().time() < deadline, f"timed out after {timeout}s waiting for {what}"
        await asyncio.sleep(0.3)


def test_stock_consumers_are_clients_of_their_group_and_receive_from_their_side(shared: Cluster) -> None:
    topic, group = "GRPC_SPLIT", "GID_STOCK_SPLIT"
    shared.create_topic(topic, QUEUES, GRAY)
    shared.ns_call(lambda ns: ns.set_switch(group, True))
    shared.ns_call(lambda ns: ns.add_rule(group, {"host": "orders-v2-*"}, True))

    async def scenario() -> None:
        v1 = RawStockConsumer(grpc_address(shared), "orders-v1-5d8f@11@0@a1", group, topic)
        v2_ = RawStockConsumer(grpc_address(shared), "orders-v2-7f9c@12@0@b2", group, topic)
        try:
            for consumer in (v1, v2_):
                assert (await consumer.open()).status.code == v2.OK
            assert await v2_.assigned() == GRAY_QUEUES
            assert await v1.assigned() == NORMAL_QUEUES
            clients = await asyncio.to_thread(clients_of, shared.ns_url, group)
            assert clients[v2_.client_id]["labels"] == {"host": "orders-v2-7f9c", "language": "python",
                                                        "protocol": "rocketmq5"}
            assert (clients[v2_.client_id]["role"], clients[v2_.client_id]["state"]) == ("consumer", "GRAY")
            assert clients[v1.client_id]["gray"] is False and clients[v1.client_id]["state"] == "NORMAL"
            assert sorted(clients[v2_.client_id]["queues"]) == [f"broker-a:{topic}:{q}" for q in sorted(GRAY_QUEUES)]

            await asyncio.to_thread(shared.ns_call, lambda ns: ns.set_flag(group, v1.client_id, True, reason="test"))
            await eventually(lambda: clients_of(shared.ns_url, group)[v1.client_id]["gray"], "v1 to apply gray")
            assert await v1.assigned() == GRAY_QUEUES  # normal -> gray: at once, nothing to drain
        finally:
            await v1.close()
            await v2_.close()
        await eventually(lambda: not clients_of(shared.ns_url, group), "both to leave the group when their "
                         "streams close")

    asyncio.run(scenario())


def commit_gray_queues(ns_url: str, group: str, topic: str) -> None:
    """Consume the gray queues in ``group``'s name (commit each at its max offset), as a receive-and-ack would."""

    async def commit() -> None:
        reader = PullConsumer(group, ns_url, gray=True, register=False)
        try:
            for queue_id in GRAY_QUEUES:
                mq = MessageQueue(topic, "broker-a", queue_id)
                await reader.commit(mq, await reader.max_offset(mq))
        finally:
            await reader.stop()

    asyncio.run(commit())


def test_a_promote_waits_for_the_gray_stock_consumer_to_drain_the_gray_queues_then_it_is_normal(
        shared: Cluster, tmp_path: Path) -> None:
    topic, group = "GRPC_DRAIN", "GID_STOCK_DRAIN"
    shared.create_topic(topic, QUEUES, GRAY)
    shared.ns_call(lambda ns: ns.set_switch(group, True))
    shared.ns_call(lambda ns: ns.add_rule(group, {"host": "orders-v2-*"}, True))
    produce(shared.ns_url, topic, "--gray", "--count", "8", "--size", "16")  # 8 gray messages nobody consumed

    async def scenario() -> None:
        v2_ = RawStockConsumer(grpc_address(shared), "orders-v2-0a1b@21@0@c3", group, topic)
        promoted: dict[str, Any] = {}
        try:
            assert (await v2_.open()).status.code == v2.OK
            assert await v2_.assigned() == GRAY_QUEUES
            promote = threading.Thread(target=lambda: promoted.update(result=graymq(
                shared.ns_url, "gray", "promote", group, "--timeout", "60", "--json", check=False)))
            promote.start()
            await eventually(lambda: clients_of(shared.ns_url, group)[v2_.client_id]["state"] == "DRAINING",
                             "the gray stock consumer to drain")
            await asyncio.sleep(1.0)  # draining goes on while the gray backlog is there
            assert clients_of(shared.ns_url, group)[v2_.client_id]["state"] == "DRAINING"
            assert await v2_.assigned() == GRAY_QUEUES  # it still receives from the gray queues
            assert promote.is_alive()

            await asyncio.to_thread(commit_gray_queues, shared.ns_url, group, topic)
            await asyncio.to_thread(promote.join, 60)
            result = promoted["result"]
            assert result.returncode == 0, result.stdout + result.stderr
            client = clients_of(shared.ns_url, group)[v2_.client_id]
            assert (client["gray"], client["state"]) == (False, "NORMAL")
            assert await v2_.assigned() == NORMAL_QUEUES
        finally:
            await v2_.close()

    asyncio.run(scenario())
