"""A stock client's changed state reaches the name server at once, not with the broker's next heartbeat of its stock
clients: on a broker that beats once an hour, a stock consumer whose first answer makes it gray is listed GRAY, one
whose gray side is rolled back RETIRED with no queue, and a stock producer's applied flag is listed, each well before
the interval. ``graymq gray status`` and a promote read these states."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from graymq.core.queue_layout import gray_queue_ids
from graymq.nameserver_api.client import NameServerClient
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from tests.support.cli import wait_for
from tests.support.cluster import Cluster, module_processes
from tests.support.stock_raw import RawStockClient, RawStockConsumer, RawStockProducer

pytestmark = pytest.mark.integration

INTERVAL_S = 3600  # the broker's heartbeat interval of its stock clients (its own too: the longest it may report)
WAIT_S = 60  # generous, and far below the interval: what is seen within it came with no periodic heartbeat
KEPT = {"GRAYMQ_CLIENT_STALE_SECONDS": str(INTERVAL_S * 2), "GRAYMQ_CLIENT_EXPIRY_SECONDS": str(INTERVAL_S * 2)}
QUEUES, GRAY = 6, 2
TOPIC, GROUP = "GRPC_REPORTS", "GID_REPORTS"  # a stock producer's producer group is its topic


@pytest.fixture(scope="module")
def hourly(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, str]]:
    """A name server that keeps silent clients listed, and ``broker-a`` (gRPC endpoint) beating once an hour; a
    gray rule ``host=orders-v2-*`` in the consumer group and the producer group; the cluster and the endpoint."""
    with module_processes(tmp_path_factory.mktemp("hourly")) as start:
        cluster = Cluster(start, pg_url, tmp_path_factory.mktemp("hourly_stores"))
        cluster.start_nameserver(**KEPT)
        broker = cluster.add_broker("broker-a", "--grpc-port", "0", GRAYMQ_BROKER_REGISTER_INTERVAL_S=str(INTERVAL_S))
        cluster.create_topic(TOPIC, QUEUES, GRAY)  # the broker registers at once when its topics change

        async def gray_for_v2(ns: NameServerClient) -> None:
            for group in (GROUP, TOPIC):
                await ns.set_switch(group, True)
                await ns.add_rule(group, {"host": "orders-v2-*"}, True)

        cluster.ns_call(gray_for_v2)
        yield cluster, str(broker.ready_info["grpc"])  # type: ignore[index]


def listed(cluster: Cluster, group: str, role: str, client_id: str) -> dict[str, Any]:
    """``client_id`` as the name server lists it in ``group`` (empty before it is)."""
    answer = cluster.ns_call(lambda ns: ns.group_clients(group, role))
    return next((c.to_json() for c in answer.clients if c.client_id == client_id), {})


async def seen(cluster: Cluster, group: str, role: str, client_id: str, what: str,
               check: Callable[[dict[str, Any]], bool]) -> None:
    """Wait (a poll, ``WAIT_S`` at most) until ``client_id`` is listed as ``check`` wants."""
    await asyncio.to_thread(wait_for, lambda: check(listed(cluster, group, role, client_id)), WAIT_S, what, 0.3)


async def opened(*clients: RawStockClient) -> None:
    """Open the clients' telemetry streams: the broker registers each from its settings."""
    for client in clients:
        assert (await client.open()).status.code == v2.OK


def test_a_stock_consumers_gray_state_and_its_roll_back_are_listed_well_before_the_next_heartbeat(
        hourly: tuple[Cluster, str]) -> None:
    cluster, endpoint = hourly
    gray_queues = sorted(f"broker-a:{TOPIC}:{q}" for q in gray_queue_ids(QUEUES, GRAY))

    async def scenario() -> None:
        v1 = RawStockConsumer(endpoint, "orders-v1-5d8f@21@0@a1", GROUP, TOPIC)
        v2_ = RawStockConsumer(endpoint, "orders-v2-7f9c@22@0@b2", GROUP, TOPIC)
        try:
            await opened(v1, v2_)  # gray by the rule: its first answer says so
            await seen(cluster, GROUP, "consumer", v2_.client_id, "the gray stock consumer listed GRAY, gray queues",
                       lambda c: (c.get("state"), sorted(c.get("queues", []))) == ("GRAY", gray_queues))
            assert (await asyncio.to_thread(listed, cluster, GROUP, "consumer", v1.client_id))["state"] == "NORMAL"

            await asyncio.to_thread(cluster.ns_call, lambda ns: ns.set_retired(GROUP, True, reason="roll back v2"))
            await seen(cluster, GROUP, "consumer", v2_.client_id, "the rolled back one listed RETIRED with no queue",
                       lambda c: (c.get("state"), c.get("queues")) == ("RETIRED", []))
        finally:
            await v1.close()
            await v2_.close()

    asyncio.run(scenario())


def test_a_stock_producers_applied_flag_is_listed_well_before_the_next_heartbeat(hourly: tuple[Cluster, str]) -> None:
    cluster, endpoint = hourly

    async def scenario() -> None:
        producer = RawStockProducer(endpoint, "orders-v2-7f9c@23@0@c3", TOPIC)
        try:
            await opened(producer)
            await seen(cluster, TOPIC, "producer", producer.client_id, "the stock producer listed gray",
                       lambda c: bool(c.get("gray")))
            await asyncio.to_thread(cluster.ns_call, lambda ns: ns.set_flag(TOPIC, producer.client_id, False,
                                                                            reason="v2 is normal now"))
            await seen(cluster, TOPIC, "producer", producer.client_id, "the stock producer listed normal",
                       lambda c: c.get("gray") is False)
        finally:
            await producer.close()

    asyncio.run(scenario())
