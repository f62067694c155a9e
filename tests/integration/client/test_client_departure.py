"""A client stopped cleanly leaves its group at once: in the name server, and on the brokers (the others rebalance).

Clients expire only after ten minutes here (name server and broker), so what a test sees within its
short deadline comes from the client saying it left, not from an expiry.
"""

from __future__ import annotations

import httpx
import pytest

from graymq.client import Producer, PushConsumer
from graymq.client.consumer.pull_consumer import PullConsumer
from graymq.client.spark.member import SparkMember
from graymq.client.spark.options import SourceOptions
from tests.support.clients import Recorder, consumer, run_scenario, wait_until
from tests.support.cluster import Cluster

pytestmark = pytest.mark.integration
GROUP = "GID_DEPART"
TOPIC = "TOPIC_DEPART"
NO_EXPIRY = {"GRAYMQ_CLIENT_EXPIRY_SECONDS": "600", "GRAYMQ_BROKER_CLIENT_EXPIRY_S": "600"}


@pytest.fixture
def ns_url(graymq_process, fresh_pg_url, tmp_path) -> str:
    cluster = Cluster(graymq_process, fresh_pg_url, tmp_path)
    cluster.start_nameserver(**NO_EXPIRY)
    cluster.add_broker("broker-a", **NO_EXPIRY)
    cluster.create_topic(TOPIC, 6, 2)
    return cluster.ns_url


def registered(ns_url: str) -> set[str]:
    """``client_id/role`` of every client the name server lists in the group."""
    response = httpx.get(f"{ns_url}/v1/groups/{GROUP}/clients", timeout=5)
    return {f"{c['client_id']}/{c['role']}" for c in response.json()["clients"]}


def unregistered(ns_url: str) -> list[str]:
    entries = httpx.get(f"{ns_url}/v1/audit", params={"group": GROUP, "object_type": "client"}, timeout=5).json()
    return sorted(e["actor"] for e in entries if e["action"] == "unregister")


def test_every_kind_of_client_leaves_the_name_server_when_it_stops(ns_url):
    async def scenario() -> None:
        push = consumer(Recorder(), ns_url, GROUP, "push", {TOPIC: "*"})
        pull = PullConsumer(GROUP, ns_url, client_id="pull", heartbeat_interval_s=0.3)
        producer = Producer(GROUP, ns_url, client_id="producer", heartbeat_interval_s=0.3)
        options = SourceOptions.parse({"nameserver": ns_url, "topic": TOPIC, "group": GROUP, "grayFlag": "true"})
        spark = SparkMember(options, labels={"version": "v2"}, client_id="spark", heartbeat_interval_s=0.3)
        started = {"push/consumer": push, "pull/consumer": pull, "producer/producer": producer, "spark/spark": spark}
        for client in started.values():
            await client.start()
        assert registered(ns_url) == set(started)
        for name, client in started.items():
            await client.stop()
            assert name not in registered(ns_url), f"{name} still listed after stop()"
        assert unregistered(ns_url) == ["producer", "pull", "push", "spark"]

    run_scenario(scenario, timeout=90)


def test_the_remaining_consumer_takes_the_queues_of_one_that_stopped_without_waiting_for_a_rebalance(ns_url):
    async def scenario() -> None:
        # rebalances only when a broker pushes "group changed": the timer would take five minutes
        a = consumer(Recorder(), ns_url, GROUP, "a", {TOPIC: "*"}, rebalance_interval_s=300.0)
        b = consumer(Recorder(), ns_url, GROUP, "b", {TOPIC: "*"}, rebalance_interval_s=300.0)

        def topic_queues(c: PushConsumer) -> list[int]:
            return sorted(mq.queue_id for mq in c.assigned() if mq.topic == TOPIC)

        await a.start()
        await b.start()
        try:
            await wait_until(lambda: len(topic_queues(a)) == len(topic_queues(b)) == 2, 20, "a and b sharing")
            await a.stop()
            await wait_until(lambda: topic_queues(b) == [1, 2, 3, 4], 10, "b taking every normal queue")
        finally:
            await b.stop()

    run_scenario(scenario, timeout=90)
