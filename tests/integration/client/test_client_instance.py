"""One client instance per ClientConfig, on real processes: the producers and consumers given one config share
its name-server client, route cache and broker connections; a broker's "group changed" reaches every consumer
sharing them; the last client to stop closes them; a config of equal values is another instance."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from graymq.client import Message, Producer, PushConsumer
from graymq.client.config import ClientConfig
from graymq.client.consumer.pull_consumer import PullConsumer
from graymq.client.instance import ClientInstance
from tests.support.clients import FAST, Recorder, run_scenario, wait_until
from tests.support.cluster import Cluster, one_broker_cluster

pytestmark = pytest.mark.integration
TOPIC = "TOPIC_INSTANCE"
GROUP = "GID_INSTANCE"


@pytest.fixture(scope="module")
def cluster(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with one_broker_cluster(pg_url, tmp_path_factory.mktemp("instance"), TOPIC, 6, 2) as started:
        yield started


def push_consumer(config: ClientConfig, recorder: Recorder, client_id: str) -> PushConsumer:
    c = PushConsumer(GROUP, config=config, listener=recorder.listener(client_id), client_id=client_id,
                     consume_from="first", **FAST)  # type: ignore[arg-type]
    c.subscribe(TOPIC, "*")
    return c


def test_two_producers_and_consumers_of_one_config_share_one_name_server_client_route_cache_and_connections(
        cluster: Cluster) -> None:
    config = ClientConfig.from_env(cluster.ns_url)
    recorder = Recorder()

    async def scenario() -> None:
        producers = [Producer("P_INSTANCE", config=config, client_id=f"p{i}") for i in range(2)]
        consumers = [push_consumer(config, recorder, f"c{i}") for i in range(2)]
        clients = [*producers, *consumers]
        instance = producers[0].client
        assert all(c.client is instance for c in clients)
        assert all(c.nameserver is instance.nameserver and c.brokers is instance.brokers for c in clients)
        lookups = []
        get_route = instance.nameserver.get_route

        async def counted(topic: str):  # type: ignore[no-untyped-def]
            lookups.append(topic)
            return await get_route(topic)

        instance.nameserver.get_route = counted  # type: ignore[method-assign]
        for client in clients:
            await client.start()
        sent = set()
        for i in range(20):
            for p in producers:
                sent.add((await p.send(Message(TOPIC, f"m{i}".encode()))).msg_id)
        assert producers[0].routes.cached(TOPIC) is producers[1].routes.cached(TOPIC) is not None
        assert consumers[0].routes.cached(TOPIC) is producers[0].routes.cached(TOPIC)
        assert lookups.count(TOPIC) < 4  # one lookup serves them all (a consumer may refresh once)
        await wait_until(lambda: recorder.msg_ids() >= sent, 30, "every message consumed")
        # both consumers hold a share: each heard the group change through the one set of connections
        await wait_until(lambda: all(c.assignment.assigned() for c in consumers), 20, "queues split between both")
        assert instance.brokers._connections  # noqa: SLF001 - the connections are open while clients use them
        for client in clients:
            await client.stop()
        assert not instance.brokers._connections  # noqa: SLF001 - the last one out closed them
        again = PullConsumer(GROUP, config=config, register=False)
        assert again.client is not instance  # a new instance for the next client of the config
        await again.stop()

    run_scenario(scenario, timeout=90)


def test_a_config_of_equal_values_is_another_instance(cluster: Cluster) -> None:
    config = ClientConfig.from_env(cluster.ns_url)

    async def scenario() -> None:
        a = Producer("P_INSTANCE", config=config)
        b = Producer("P_INSTANCE", config=dataclasses.replace(config))
        c = Producer("P_INSTANCE", cluster.ns_url)  # its own config, from its arguments
        assert len({id(p.client) for p in (a, b, c)}) == 3
        assert a.client is ClientInstance.of(config)
        await a.client.leave()
        for p in (a, b, c):
            await p.start()
            assert (await p.send(Message(TOPIC, b"x"))).msg_id
            await p.stop()

    run_scenario(scenario, timeout=60)
