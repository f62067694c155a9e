"""QueryRoute across a cluster: two brokers with gRPC endpoints register them with one name server (PostgreSQL);
``graymq topic route`` lists each broker's gRPC address, and QueryRoute on either broker answers the queues of
both, each with its own broker's endpoint. With the name server gone, a broker answers its own queues (one
warning), and goes back to every broker's once the name server is back."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator

import grpc
import pytest

from graymq.devkit.processes import GraymqProcess
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from graymq.protocol.rocketmq_v2 import service_pb2 as v2s
from graymq.protocol.rocketmq_v2 import service_pb2_grpc
from tests.support.cli import wait_for
from tests.support.cluster import FAST_ENV, Cluster, module_processes
from tests.support.trust import cli

pytestmark = pytest.mark.integration

TOPIC, QUEUES, GRAY = "GRPC_ROUTED", 4, 1
BROKERS = ("broker-a", "broker-b")


StartProcess = Callable[..., GraymqProcess]


@pytest.fixture(scope="module")
def start(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartProcess]:
    with module_processes(tmp_path_factory.mktemp("grpc_route")) as start:
        yield start


@pytest.fixture(scope="module")
def cluster(pg_url: str, start: StartProcess, tmp_path_factory: pytest.TempPathFactory) -> Cluster:
    cluster = Cluster(start, pg_url, tmp_path_factory.mktemp("grpc_route_stores"))
    cluster.start_nameserver()
    for name in BROKERS:
        cluster.add_broker(name, "--grpc-port", "0")
    cluster.create_topic(TOPIC, QUEUES, GRAY)
    return cluster


def grpc_of(cluster: Cluster, broker: str) -> str:
    info = cluster.brokers[broker].ready_info
    assert info is not None
    return str(info["grpc"])


def routed(endpoint: str) -> list[tuple[str, int, int]]:
    """QueryRoute's answer as (broker, queue id, endpoint port), sorted."""

    async def go() -> list[tuple[str, int, int]]:
        async with grpc.aio.insecure_channel(endpoint) as channel:
            answer = await service_pb2_grpc.MessagingServiceStub(channel).QueryRoute(
                v2s.QueryRouteRequest(topic=v2.Resource(name=TOPIC)), metadata=[("x-mq-client-id", "route@1@0@t")],
                timeout=10)
        assert answer.status.code == v2.OK, answer.status
        return sorted((q.broker.name, q.id, q.broker.endpoints.addresses[0].port) for q in answer.message_queues)

    return asyncio.run(go())


def expected(cluster: Cluster, *brokers: str) -> list[tuple[str, int, int]]:
    return sorted((b, q, int(grpc_of(cluster, b).rpartition(":")[2])) for b in brokers for q in range(QUEUES))


def test_topic_route_lists_each_brokers_grpc_address_in_json_and_text(cluster: Cluster) -> None:
    def listed() -> bool:
        answer = cli(cluster.ns_url, "topic", "route", TOPIC, "--json")
        assert answer.returncode == 0, answer.stderr
        brokers = json.loads(answer.stdout)["brokers"]
        return {b["broker_name"]: b["grpc_address"] for b in brokers} == {b: grpc_of(cluster, b) for b in BROKERS}

    wait_for(listed, 20, "both gRPC addresses in topic route --json")
    brokers = json.loads(cli(cluster.ns_url, "topic", "route", TOPIC, "--json").stdout)["brokers"]
    assert {"broker_name", "address", "queue_nums", "gray_queues", "perm"} <= set(brokers[0])  # the shape kept
    text = cli(cluster.ns_url, "topic", "route", TOPIC).stdout
    assert "grpc" in text.splitlines()[0] and all(grpc_of(cluster, b) in text for b in BROKERS), text


def test_query_route_on_either_broker_answers_every_brokers_queues_with_its_own_endpoint(cluster: Cluster) -> None:
    both = expected(cluster, *BROKERS)
    for broker in BROKERS:
        wait_for(lambda b=broker: routed(grpc_of(cluster, b)) == both, 20, f"QueryRoute on {broker} lists both")


def test_without_a_name_server_query_route_answers_this_brokers_queues_then_every_brokers_again(
        cluster: Cluster, start: StartProcess) -> None:
    (nameserver,) = cluster.nameservers
    port = cluster.ns_url.rpartition(":")[2]
    nameserver.terminate()
    endpoint = grpc_of(cluster, "broker-a")
    wait_for(lambda: routed(endpoint) == expected(cluster, "broker-a"), 30, "broker-a's own queues only")
    assert routed(endpoint) == expected(cluster, "broker-a")  # the outage is cached, not retried per call
    broker_a = cluster.brokers["broker-a"]
    assert broker_a.output.count("QueryRoute answers this broker's queues only") == 1, broker_a.output[-3000:]

    start("nameserver", "--port", port, "--db", cluster.db_url, "--dev", env=FAST_ENV)  # where the brokers look
    wait_for(lambda: routed(endpoint) == expected(cluster, *BROKERS), 40, "both brokers' queues again")
    # logged before that answer went, but read from the broker's output by a thread of this process: it may lag
    wait_for(lambda: "QueryRoute answers every broker's queues again" in broker_a.output, 10, "the line saying so")
