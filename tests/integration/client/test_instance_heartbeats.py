"""The clients of one ClientInstance heartbeat the name server together (batched requests, one watch) and each broker
together (one request carrying every consumer's data), on real processes, and the name server and the broker still
keep each as its own client: each is listed and answered on its own, one stopped inside the process leaves its group
at once while the others stay, and a process killed with SIGKILL leaves after the name server's client expiry, as
clients heartbeating alone did."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from graymq.client import Producer, PushConsumer
from graymq.client.blocking_producer import BlockingProducer
from graymq.client.broker_beats import BEATS_PER_LIMIT
from graymq.client.config import ClientConfig
from graymq.client.instance import ClientInstance
from graymq.client.spark.job_producer import JobProducer
from graymq.client.spark.member import SparkMember
from graymq.client.spark.options import SourceOptions
from graymq.client.sync import SyncProducer
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.broker_client import BrokerClient
from graymq.protocol.errors import ConsumerNotOnlineError
from tests.support.clients import FAST, Recorder, run_scenario, wait_until
from tests.support.cluster import Cluster

pytestmark = pytest.mark.integration
GROUP = "GID_FLEET"
PRODUCERS = "PID_FLEET"
TOPIC = "TOPIC_FLEET"
ONE_QUEUE = "TOPIC_FLEET_ONE"
NO_EXPIRY = {"GRAYMQ_CLIENT_EXPIRY_SECONDS": "600", "GRAYMQ_BROKER_CLIENT_EXPIRY_S": "600"}
EXPIRY_S = 4
STALE_S = 2  # below the expiry: listed stale first


def cluster_of(graymq_process: Any, pg_url: str, root: Path, **env: str) -> Cluster:
    cluster = Cluster(graymq_process, pg_url, root)
    cluster.start_nameserver(**env)
    cluster.add_broker("broker-a", **env)
    cluster.create_topic(TOPIC, 6, 2)
    return cluster


def listed(ns_url: str, group: str) -> dict[str, dict[str, Any]]:
    """The clients the name server lists in ``group`` (live ones: heartbeat within the expiry), by id."""
    response = httpx.get(f"{ns_url}/v1/groups/{group}/clients", timeout=5)
    return {c["client_id"]: c for c in response.json()["clients"]}


def unregistered(ns_url: str, group: str) -> list[str]:
    entries = httpx.get(f"{ns_url}/v1/audit", params={"group": group, "object_type": "client"}, timeout=5).json()
    return sorted(e["actor"] for e in entries if e["action"] == "unregister")


class Counted:
    """The heartbeats of one instance: to the name server sent alone, and the client ids of each batched request
    (full heartbeats and alive beats, by key or by id; ``alive``: those of the alive beats) to the name server and to
    the brokers."""

    def __init__(self, instance: ClientInstance) -> None:
        self.single: list[str] = []
        self.batches: list[list[str]] = []
        self.alive: list[list[str]] = []
        self.broker_batches: list[list[str]] = []
        nameserver, brokers = instance.nameserver, instance.brokers
        single, request, broker_heartbeat = nameserver.client_heartbeat, nameserver.request, brokers.heartbeat

        async def heartbeat_broker(address: str, req: pb.HeartbeatRequest) -> pb.HeartbeatResponse:
            self.broker_batches.append([data.client_id for data in req.consumers])
            return await broker_heartbeat(address, req)

        brokers.heartbeat = heartbeat_broker  # type: ignore[method-assign]

        async def client_heartbeat(body: dict[str, Any]) -> Any:
            self.single.append(body["client_id"])
            return await single(body)

        # the alive id each client's full heartbeat was given -> its client id (those given before counting began too)
        alive_ids = {acked.alive_id: key[1] for key, acked in instance.session._acked.items()}

        async def counted_request(method: str, path: str, **kwargs: Any) -> Any:
            if path != "/v1/clients/heartbeats":
                return await request(method, path, **kwargs)
            body = kwargs["json"]
            alive = [b["client_id"] for b in body.get("alive", [])] + [alive_ids[i] for i in body.get("alive_ids", [])]
            self.batches.append([b["client_id"] for b in body["heartbeats"]] + alive)
            self.alive.append(alive)
            answer = await request(method, path, **kwargs)
            alive_ids.update({result["alive_id"]: report["client_id"] for report, result in zip(
                body["heartbeats"], answer["results"], strict=True) if "alive_id" in result})
            return answer

        nameserver.client_heartbeat = client_heartbeat  # type: ignore[method-assign]
        nameserver.request = counted_request  # type: ignore[method-assign]


async def broker_listed(c: PushConsumer) -> set[str]:
    """The consumers of ``GROUP`` the broker lists (from their heartbeats)."""
    address = next(iter(c.runtime.broker_addresses()))
    return {client.client_id for client in (await c.brokers.consumer_list(address, GROUP)).clients}


def consumer(config: ClientConfig, client_id: str) -> PushConsumer:
    c = PushConsumer(GROUP, config=config, listener=Recorder().listener(client_id), client_id=client_id,
                     **FAST)  # type: ignore[arg-type]
    c.subscribe(TOPIC, "*")
    return c


def test_one_instance_sends_its_clients_heartbeats_together_and_each_is_listed_and_answered_as_its_own(
        graymq_process, fresh_pg_url, tmp_path) -> None:
    cluster = cluster_of(graymq_process, fresh_pg_url, tmp_path, **NO_EXPIRY)
    config = ClientConfig.from_env(cluster.ns_url)

    async def scenario() -> None:
        consumers = [consumer(config, f"c{i}") for i in range(3)]
        producers = [Producer(PRODUCERS, config=config, client_id=f"p{i}", heartbeat_interval_s=0.3) for i in range(2)]
        counted = Counted(consumers[0].client)
        for client in [*consumers, *producers]:
            await client.start()
        assert set(listed(cluster.ns_url, GROUP)) == {"c0", "c1", "c2"}
        assert set(listed(cluster.ns_url, PRODUCERS)) == {"p0", "p1"}
        await wait_until(lambda: sum(len(b) for b in counted.batches) >= 30, 30, "ten intervals of heartbeats")
        assert counted.single == []
        assert max(len(set(b)) for b in counted.batches) > 1, "no request carried two clients' heartbeats"
        assert {c for b in counted.batches for c in b} == {"c0", "c1", "c2", "p0", "p1"}
        assert {c for b in counted.alive for c in b} == {"c0", "c1", "c2", "p0", "p1"}, "unchanged reports beat alive"
        await wait_until(lambda: len(counted.broker_batches) >= 10, 30, "ten heartbeats to the broker")
        assert max(len(b) for b in counted.broker_batches) > 1, "no broker heartbeat carried two consumers"
        assert await broker_listed(consumers[0]) == {"c0", "c1", "c2"}
        # the group's switch reaches each consumer through the instance's one watch, and no producer
        admin = cluster.admin()
        await admin.set_switch(GROUP, False, "test")
        await admin.close()
        await wait_until(lambda: not any(c.gray_switch for c in consumers), 20, "every consumer seeing the switch")
        assert all(p.membership.last is not None and p.membership.last.gray_switch for p in producers)
        for client in [*consumers, *producers]:
            await client.stop()

    run_scenario(scenario, timeout=90)


def test_a_client_stopped_inside_a_process_leaves_at_once_while_the_others_of_its_instance_stay(
        graymq_process, fresh_pg_url, tmp_path) -> None:
    cluster = cluster_of(graymq_process, fresh_pg_url, tmp_path, **NO_EXPIRY)
    config = ClientConfig.from_env(cluster.ns_url)

    async def scenario() -> None:
        consumers = [consumer(config, f"c{i}") for i in range(3)]
        for c in consumers:
            await c.start()
        counted = Counted(consumers[0].client)
        assert set(listed(cluster.ns_url, GROUP)) == {"c0", "c1", "c2"}
        await consumers[1].stop()
        assert set(listed(cluster.ns_url, GROUP)) == {"c0", "c2"}
        assert unregistered(cluster.ns_url, GROUP) == ["c1"]
        assert await broker_listed(consumers[0]) == {"c0", "c2"}
        counted.batches.clear()
        counted.broker_batches.clear()
        await wait_until(lambda: sum(len(b) for b in counted.batches) >= 6 and len(counted.broker_batches) >= 4, 30,
                         "the others heartbeating on")
        assert {c for b in counted.batches for c in b} == {"c0", "c2"}
        assert {c for b in counted.broker_batches for c in b} == {"c0", "c2"}
        assert set(listed(cluster.ns_url, GROUP)) == {"c0", "c2"}
        assert await broker_listed(consumers[0]) == {"c0", "c2"}
        for c in (consumers[0], consumers[2]):
            await c.stop()

    run_scenario(scenario, timeout=90)


def rare_consumer(config: ClientConfig, client_id: str, topic: str) -> PushConsumer:
    """A consumer whose broker heartbeats are five minutes apart, rebalancing only when told."""
    c = PushConsumer(GROUP, config=config, listener=Recorder().listener(client_id), client_id=client_id,
                     **{**FAST, "heartbeat_interval_s": 300.0, "rebalance_interval_s": 300.0})  # type: ignore[arg-type]
    c.subscribe(topic, "*")
    return c


async def listed_by(observer: BrokerClient, address: str) -> set[str]:
    """The consumers of ``GROUP`` the broker at ``address`` lists, asked on a connection of ``observer``'s."""
    try:
        return {client.client_id for client in (await observer.consumer_list(address, GROUP)).clients}
    except ConsumerNotOnlineError:
        return set()


def test_a_broker_that_dropped_an_instances_connection_lists_its_idle_consumers_again_when_it_reconnects(
        graymq_process, fresh_pg_url, tmp_path) -> None:
    """The broker drops the consumers of a closed connection; the instance's next connection there carries every
    consumer's last heartbeat at once, also that of a consumer holding no queue there (nothing of its own calls that
    broker), whose own next heartbeat is minutes away."""
    cluster = cluster_of(graymq_process, fresh_pg_url, tmp_path, **NO_EXPIRY, GRAYMQ_BROKER_QUEUE_LEASE_S="600")
    cluster.create_topic(ONE_QUEUE, 1, 0)
    config = ClientConfig.from_env(cluster.ns_url)

    async def scenario() -> None:
        consumers = [rare_consumer(config, f"c{i}", ONE_QUEUE) for i in range(2)]
        observer = BrokerClient()
        try:
            for c in consumers:
                await c.start()
            address = next(iter(consumers[0].runtime.broker_addresses()))
            await wait_until(lambda: sum(len(c.assigned()) for c in consumers) == 1, 20, "one holding the queue")
            assert await listed_by(observer, address) == {"c0", "c1"}
            await (await consumers[0].brokers.connection(address)).close()
            deadline = time.monotonic() + 20
            while (now_listed := await listed_by(observer, address)) != {"c0", "c1"}:
                assert time.monotonic() < deadline, f"only {sorted(now_listed)} listed again"
                await asyncio.sleep(0.1)
        finally:
            for c in consumers:
                await c.stop()
            await observer.close()

    run_scenario(scenario, timeout=90)


def test_a_consumer_configured_to_beat_rarely_beats_within_a_brokers_shorter_client_expiry(
        graymq_process, fresh_pg_url, tmp_path) -> None:
    """Each heartbeat's answer names the broker's client expiry: a consumer configured to beat every five minutes
    beats four times within it, and stays in the group over several expiries."""
    env = {"GRAYMQ_CLIENT_EXPIRY_SECONDS": "600", "GRAYMQ_BROKER_CLIENT_EXPIRY_S": str(EXPIRY_S)}
    cluster = cluster_of(graymq_process, fresh_pg_url, tmp_path, **env)
    config = ClientConfig.from_env(cluster.ns_url)

    async def scenario() -> None:
        c = rare_consumer(config, "c0", TOPIC)
        observer = BrokerClient()
        try:
            await c.start()
            address = next(iter(c.runtime.broker_addresses()))
            assert c.heartbeats.beats.interval_s(300.0) == pytest.approx(EXPIRY_S / BEATS_PER_LIMIT)
            for _ in range(3 * EXPIRY_S):
                assert await listed_by(observer, address) == {"c0"}, "the consumer expired on the broker"
                await asyncio.sleep(1)
        finally:
            await c.stop()
            await observer.close()

    run_scenario(scenario, timeout=90)


def poll(predicate: Any, what: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_blocking_producer_heartbeats_in_its_instances_requests_follows_its_flag_and_leaves_at_once(
        graymq_process, fresh_pg_url, tmp_path) -> None:
    cluster = cluster_of(graymq_process, fresh_pg_url, tmp_path, **NO_EXPIRY)
    config = ClientConfig.from_env(cluster.ns_url)
    blocking = BlockingProducer(PRODUCERS, config=config, client_id="blocking", heartbeat_interval_s=0.3)
    other = SyncProducer(PRODUCERS, config=config, client_id="async", heartbeat_interval_s=0.3)
    assert blocking.client is other.client
    counted = Counted(blocking.client)
    blocking.start()
    other.start()
    try:
        assert set(listed(cluster.ns_url, PRODUCERS)) == {"blocking", "async"}
        poll(lambda: sum(len(b) for b in counted.batches) >= 20, "ten intervals of heartbeats")
        assert counted.single == []
        assert any(set(b) == {"blocking", "async"} for b in counted.batches), counted.batches
        admin = cluster.admin()
        asyncio.run(admin.set_flag(PRODUCERS, "blocking", True, "test"))
        poll(lambda: blocking.gray, "the blocking producer's flag through the instance's watch")
        assert not other.gray
        blocking.stop()
        assert set(listed(cluster.ns_url, PRODUCERS)) == {"async"}
        assert unregistered(cluster.ns_url, PRODUCERS) == ["blocking"]
        counted.batches.clear()
        poll(lambda: len(counted.batches) >= 3, "the async producer heartbeating on")
        assert {c for b in counted.batches for c in b} == {"async"}
    finally:
        blocking.stop()
        other.stop()


def test_a_blocking_producer_started_after_an_async_client_runs_on_that_clients_loop(
        graymq_process, fresh_pg_url, tmp_path) -> None:
    cluster = cluster_of(graymq_process, fresh_pg_url, tmp_path, **NO_EXPIRY)
    config = ClientConfig.from_env(cluster.ns_url)

    async def scenario() -> None:
        producer = Producer(PRODUCERS, config=config, client_id="async", heartbeat_interval_s=0.3)
        await producer.start()
        blocking = BlockingProducer(PRODUCERS, config=config, client_id="blocking", heartbeat_interval_s=0.3)
        counted = Counted(producer.client)
        await asyncio.to_thread(blocking.start)
        await wait_until(lambda: any(set(b) == {"blocking", "async"} for b in counted.batches), 30,
                         "one request carrying both producers")
        await asyncio.to_thread(blocking.stop)
        assert set(listed(cluster.ns_url, PRODUCERS)) == {"async"}
        await producer.stop()

    run_scenario(scenario, timeout=90)


def test_a_spark_jobs_member_and_producer_given_one_config_heartbeat_in_one_request(
        graymq_process, fresh_pg_url, tmp_path) -> None:
    cluster = cluster_of(graymq_process, fresh_pg_url, tmp_path, **NO_EXPIRY)
    config = ClientConfig.from_env(cluster.ns_url)
    options = SourceOptions.parse({"nameserver": cluster.ns_url, "topic": TOPIC, "group": GROUP, "grayFlag": "true"})

    async def scenario() -> None:
        member = SparkMember(options, labels={"app": "job"}, client_id="job", heartbeat_interval_s=0.3,
                             config=config)
        producer = JobProducer(PRODUCERS, config, client_id="job", labels={"app": "job"}, lane="gray",
                               heartbeat_interval_s=0.3)
        counted = Counted(member.consumer.client)
        await member.start()
        await producer.start()
        await wait_until(lambda: sum(len(b) for b in counted.batches) >= 10, 30, "five intervals of heartbeats")
        assert counted.single == []
        assert any(len(b) == 2 for b in counted.batches), counted.batches
        assert set(listed(cluster.ns_url, GROUP)) == {"job"} and listed(cluster.ns_url, GROUP)["job"]["role"] == "spark"
        assert listed(cluster.ns_url, PRODUCERS)["job"]["declared_gray"] is True
        await member.stop()
        assert listed(cluster.ns_url, GROUP) == {}
        assert set(listed(cluster.ns_url, PRODUCERS)) == {"job"}
        await producer.stop()

    run_scenario(scenario, timeout=90)


CLIENTS_PROCESS = textwrap.dedent("""
    import asyncio, sys
    from graymq.client import ClientConfig, Producer, PushConsumer

    async def ignore(messages):
        return None

    async def main():
        config = ClientConfig.from_env(sys.argv[1])
        clients = [Producer("PID_FLEET", config=config, client_id=f"p{i}", heartbeat_interval_s=0.3)
                   for i in range(2)]
        for i in range(2):
            c = PushConsumer("GID_FLEET", config=config, listener=ignore, client_id=f"c{i}", nameserver_interval_s=0.3)
            c.subscribe("TOPIC_FLEET", "*")
            clients.append(c)
        for client in clients:
            await client.start()
        print("started", flush=True)
        while True:  # the alive beats the name server refreshed
            await asyncio.sleep(0.3)
            print(clients[0].client.session.alive_beats, flush=True)

    asyncio.run(main())
""")


def test_the_clients_of_a_killed_process_leave_after_the_name_servers_expiry_each_on_its_own(
        graymq_process, fresh_pg_url, tmp_path) -> None:
    env = {"GRAYMQ_CLIENT_EXPIRY_SECONDS": str(EXPIRY_S), "GRAYMQ_BROKER_CLIENT_EXPIRY_S": str(EXPIRY_S),
           "GRAYMQ_CLIENT_STALE_SECONDS": str(STALE_S)}
    cluster = cluster_of(graymq_process, fresh_pg_url, tmp_path, **env)
    script = tmp_path / "clients.py"
    script.write_text(CLIENTS_PROCESS)
    proc = subprocess.Popen([sys.executable, str(script), cluster.ns_url], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "started"
        deadline = time.monotonic() + 30
        while len(listed(cluster.ns_url, GROUP)) + len(listed(cluster.ns_url, PRODUCERS)) < 4:
            assert time.monotonic() < deadline, "the four clients never listed"
            time.sleep(0.1)
        alive = [0]  # the alive beats the process printed last
        threading.Thread(target=lambda: [alive.__setitem__(0, int(line)) for line in proc.stdout or ()],
                         daemon=True).start()
        # beyond an expiry of heartbeats: still listed and not stale, so each is kept live by the batched beats,
        # most of them alive beats (their reports do not change)
        time.sleep(EXPIRY_S + 1)
        assert alive[0] > 8, "the unchanged clients did not beat alive"
        clients = {**listed(cluster.ns_url, GROUP), **listed(cluster.ns_url, PRODUCERS)}
        assert set(clients) == {"c0", "c1", "p0", "p1"}
        assert not any(c["stale"] for c in clients.values()), clients
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 60
    while not all(c["stale"] for c in [*listed(cluster.ns_url, GROUP).values(),
                                       *listed(cluster.ns_url, PRODUCERS).values()]):
        assert time.monotonic() < deadline, "the killed process's clients never went stale"
        time.sleep(0.1)
    while listed(cluster.ns_url, GROUP) or listed(cluster.ns_url, PRODUCERS):
        assert time.monotonic() < deadline, "the killed process's clients never expired"
        time.sleep(0.2)
    assert unregistered(cluster.ns_url, GROUP) == [] and unregistered(cluster.ns_url, PRODUCERS) == []
