"""Stock consumers in a gray release, decided on the broker: a consumer talking RocketMQ 5's gRPC protocol (a
telemetry stream with its settings, as the SDKs open one) is a client of its group in the name server (role
``consumer``, ``protocol: rocketmq5``, its host as a label for the rules), QueryAssignment gives a gray one the gray
queues and a normal one the others, and a promote makes the gray one drain the gray queues before it turns normal.

Then the release as users run it, with the stock clients unchanged: the Python SDK's producers and simple consumers in
processes of their own under the host names of v1 and v2 pods (``unshare --uts``), one rule ``host=orders-v2-*``:
v2's messages reach only v2's consumer, v1's only v1's; ``graymq gray promote`` while both produce loses nothing, and
afterwards v2's messages go to normal queues."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from graymq.client import PullConsumer
from graymq.client.message import MessageQueue
from graymq.core.queue_layout import gray_queue_ids
from graymq.nameserver_api.client import NameServerClient
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from tests.support.cli import gray_status, graymq, produce, wait_for
from tests.support.cluster import Cluster
from tests.support.stock_raw import RawStockConsumer
from tests.support.stock_reads import stored_messages
from tests.support.stock_sdk import StockProducer, StockSimpleConsumer

pytestmark = pytest.mark.integration

QUEUES, GRAY = 6, 2
GRAY_QUEUES = set(gray_queue_ids(QUEUES, GRAY))
NORMAL_QUEUES = set(range(QUEUES)) - GRAY_QUEUES
TOPIC, GROUP = "GRPC_CANARY", "GID_CANARY"  # the SDK test's; a stock producer's producer group is its topic
V1_HOST, V2_HOST = "orders-v1-6b7c9", "orders-v2-9d4e1"


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


def gray_for_v2_pods(cluster: Cluster, topic: str, *groups: str) -> None:
    """``topic`` with its gray queues, and in each of ``groups`` the gray switch on and one rule:
    ``host=orders-v2-*``."""
    cluster.create_topic(topic, QUEUES, GRAY)

    async def switch_and_rule(ns: NameServerClient) -> None:
        for group in groups:
            await ns.set_switch(group, True)
            await ns.add_rule(group, {"host": "orders-v2-*"}, True)

    cluster.ns_call(switch_and_rule)


def test_stock_consumers_are_clients_of_their_group_and_receive_from_their_side(
        grpc_cluster: Cluster, grpc_endpoint: str) -> None:
    topic, group = "GRPC_SPLIT", "GID_STOCK_SPLIT"
    gray_for_v2_pods(grpc_cluster, topic, group)

    async def scenario() -> None:
        v1 = RawStockConsumer(grpc_endpoint, "orders-v1-5d8f@11@0@a1", group, topic)
        v2_ = RawStockConsumer(grpc_endpoint, "orders-v2-7f9c@12@0@b2", group, topic)
        try:
            for consumer in (v1, v2_):
                assert (await consumer.open()).status.code == v2.OK
            assert await v2_.assigned() == GRAY_QUEUES
            assert await v1.assigned() == NORMAL_QUEUES
            # the side its first answer gave it was reported before it was served (above)
            clients = await asyncio.to_thread(clients_of, grpc_cluster.ns_url, group)
            assert clients[v2_.client_id]["labels"] == {"host": "orders-v2-7f9c", "language": "python",
                                                        "protocol": "rocketmq5"}
            assert (clients[v2_.client_id]["role"], clients[v2_.client_id]["state"]) == ("consumer", "GRAY")
            assert clients[v1.client_id]["gray"] is False and clients[v1.client_id]["state"] == "NORMAL"
            assert sorted(clients[v2_.client_id]["queues"]) == [f"broker-a:{topic}:{q}" for q in sorted(GRAY_QUEUES)]

            await asyncio.to_thread(grpc_cluster.ns_call,
                                    lambda ns: ns.set_flag(group, v1.client_id, True, reason="test"))
            await eventually(lambda: clients_of(grpc_cluster.ns_url, group)[v1.client_id]["gray"], "v1 to apply gray")
            assert await v1.assigned() == GRAY_QUEUES  # normal -> gray: at once, nothing to drain
        finally:
            await v1.close()
            await v2_.close()
        await eventually(lambda: not clients_of(grpc_cluster.ns_url, group), "both to leave the group when their "
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
        grpc_cluster: Cluster, grpc_endpoint: str) -> None:
    topic, group = "GRPC_DRAIN", "GID_STOCK_DRAIN"
    gray_for_v2_pods(grpc_cluster, topic, group)
    produce(grpc_cluster.ns_url, topic, "--gray", "--count", "8", "--size", "16")  # 8 gray messages nobody consumed

    async def scenario() -> None:
        v2_ = RawStockConsumer(grpc_endpoint, "orders-v2-0a1b@21@0@c3", group, topic)
        promoted: dict[str, Any] = {}
        try:
            assert (await v2_.open()).status.code == v2.OK
            assert await v2_.assigned() == GRAY_QUEUES
            promote = threading.Thread(target=lambda: promoted.update(result=graymq(
                grpc_cluster.ns_url, "gray", "promote", group, "--timeout", "60", "--json", check=False)))
            promote.start()
            await eventually(lambda: clients_of(grpc_cluster.ns_url, group)[v2_.client_id]["state"] == "DRAINING",
                             "the gray stock consumer to drain")
            await asyncio.sleep(1.0)  # draining goes on while the gray backlog is there
            assert clients_of(grpc_cluster.ns_url, group)[v2_.client_id]["state"] == "DRAINING"
            assert await v2_.assigned() == GRAY_QUEUES  # it still receives from the gray queues
            assert promote.is_alive()

            await asyncio.to_thread(commit_gray_queues, grpc_cluster.ns_url, group, topic)
            await asyncio.to_thread(promote.join, 60)
            result = promoted["result"]
            assert result.returncode == 0, result.stdout + result.stderr
            client = clients_of(grpc_cluster.ns_url, group)[v2_.client_id]
            assert (client["gray"], client["state"]) == (False, "NORMAL")
            assert await v2_.assigned() == NORMAL_QUEUES
        finally:
            await v2_.close()

    asyncio.run(scenario())


class Received:
    """A running SDK consumer receiving (and acking) in the background: message bodies in order of arrival."""

    def __init__(self, consumer: StockSimpleConsumer) -> None:
        self.consumer = consumer
        self.client_id = str(consumer.started["client_id"])
        self.bodies: list[str] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._gather, daemon=True)
        self._thread.start()

    def _gather(self) -> None:
        while not self._stop.is_set():
            answer = self.consumer.call({"receive": 32, "invisible": 10, "ack": True})  # a long poll of up to 2 s
            if "error" in answer:  # retried, as a consumer would; the test sees it
                self.errors.append(answer["error"])
                self._stop.wait(0.2)
            self.bodies.extend(m["body"] for m in answer.get("messages", []))

    def stop(self) -> None:
        """Stop receiving, then shut the consumer down."""
        self._stop.set()
        self._thread.join(30)
        self.consumer.close()


def sends(producer: StockProducer, count: int) -> list[str]:
    """The message ids of a producer's ``count`` sends (each must succeed)."""
    assert "client_id" in producer.next()
    results = [producer.next() for _ in range(count)]
    assert all("message_id" in r for r in results), results
    assert producer.wait(60) == 0
    return [r["message_id"] for r in results]


class Acked:
    """A running producer's results as they come: ``take`` gathers what it printed, ``at_least`` waits for more."""

    def __init__(self, producer: StockProducer, prefix: str) -> None:
        self.producer = producer
        self.prefix = prefix
        self.results: list[dict[str, Any]] = []

    def take(self) -> list[str]:
        """The bodies of every send the broker took so far (the driver prints results in send order)."""
        for line in self.producer.printed():
            if "client_id" not in line:
                self.results.append(line)
        assert all("message_id" in r for r in self.results), [r for r in self.results if "message_id" not in r]
        return [f"{self.prefix}-{i}" for i in range(len(self.results))]

    def at_least(self, count: int) -> None:
        until(f"{count} sends", lambda: len(self.take()) >= count, timeout=30)


def sdk_producer(endpoint: str, home: Path, host: str, prefix: str, count: int, interval_s: float = 0.0
            ) -> StockProducer:
    return StockProducer(endpoint, TOPIC, [{"body": f"{prefix}-{i}"} for i in range(count)],
                         home / f"{prefix}-producer", host=host, interval_s=interval_s)


def stored_queues(ns_url: str, message_ids: set[str]) -> dict[str, int]:
    """message id -> the queue it is stored in, for ``message_ids`` (read back by graymq's PullConsumer)."""
    stored = stored_messages(ns_url, TOPIC, QUEUES, GRAY, len(message_ids))
    return {m.msg_id: m.queue_id for m in stored if m.msg_id in message_ids}


def until(what: str, check: Callable[[], bool], timeout: float = 60.0) -> None:
    wait_for(check, timeout, what, interval=0.3)


def test_v2_pods_get_v2_messages_only_and_a_promote_while_both_produce_loses_nothing(
        grpc_cluster: Cluster, grpc_endpoint: str, tmp_path: Path) -> None:
    # the consumers' group, and the stock producers' (named after their topic)
    gray_for_v2_pods(grpc_cluster, TOPIC, GROUP, TOPIC)
    address = grpc_endpoint
    v1 = Received(StockSimpleConsumer(address, GROUP, TOPIC, tmp_path / "v1-consumer", host=V1_HOST))
    v2 = Received(StockSimpleConsumer(address, GROUP, TOPIC, tmp_path / "v2-consumer", host=V2_HOST))
    producers: dict[int, StockProducer] = {}
    try:
        assert v1.client_id.startswith(f"{V1_HOST}@") and v2.client_id.startswith(f"{V2_HOST}@")
        until("both consumers in gray status",
              lambda: {v1.client_id, v2.client_id} <= set(clients_of(grpc_cluster.ns_url, GROUP)))
        clients = clients_of(grpc_cluster.ns_url, GROUP)
        assert (clients[v2.client_id]["gray"], clients[v1.client_id]["gray"]) == (True, False)
        assert clients[v2.client_id]["labels"]["protocol"] == "rocketmq5"

        # the split: each version's messages reach its own consumer only
        for host, version in ((V1_HOST, "v1"), (V2_HOST, "v2")):
            sends(sdk_producer(grpc_endpoint, tmp_path, host, version, 20), 20)
        until("both consumers to receive the 40 messages", lambda: len(v1.bodies) + len(v2.bodies) >= 40)
        assert sorted(v1.bodies) == sorted(f"v1-{i}" for i in range(20)), v1.bodies
        assert sorted(v2.bodies) == sorted(f"v2-{i}" for i in range(20)), v2.bodies

        # a promote while both produce: every message the broker took is received
        producers = {v: sdk_producer(grpc_endpoint, tmp_path, host, f"p{v}", 5000, 0.02)
                     for v, host in ((1, V1_HOST), (2, V2_HOST))}
        acked = {v: Acked(producer, f"p{v}") for v, producer in producers.items()}
        for taken in acked.values():
            taken.at_least(10)
        promote = graymq(grpc_cluster.ns_url, "gray", "promote", GROUP, "--producer-group", TOPIC, "--timeout", "90",
                         "--json", check=False)
        assert promote.returncode == 0, promote.stdout + promote.stderr
        assert json.loads(promote.stdout)["state"] == "SUCCEEDED"
        before = {v: len(taken.take()) for v, taken in acked.items()}  # sent before the promote ended
        for taken in acked.values():
            taken.at_least(len(taken.results) + 20)  # and after: the producers went on through the promote
        for producer in producers.values():
            producer.kill()
        expected = {body for taken in acked.values() for body in taken.take()}
        until(f"the {len(expected)} messages sent during and after the promote to be received",
              lambda: expected <= set(v1.bodies) | set(v2.bodies))
        client = clients_of(grpc_cluster.ns_url, GROUP)[v2.client_id]
        assert (client["gray"], client["state"]) == (False, "NORMAL")

        # afterwards v2's messages go to normal queues
        after = {r["message_id"] for r in acked[2].results[before[2]:]}
        placed = stored_queues(grpc_cluster.ns_url, after)
        assert set(placed) == after and not set(placed.values()) & GRAY_QUEUES, placed
        assert not v1.errors and not v2.errors, (v1.errors, v2.errors)
    finally:
        for producer in producers.values():
            producer.kill()
        for consumer in (v1, v2):
            consumer.stop()
