"""Real processes scraped as Prometheus would: the broker's ``--metrics-port`` and the name server's
``/metrics``, parsed with ``prometheus_client``'s parser (malformed text fails), following sends and pulls."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from graymq.devkit.processes import GraymqProcess
from graymq.nameserver_api.client import NameServerClient
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.broker_client import BrokerClient
from graymq.protocol.record import iter_records
from tests.support.broker import create_topic, pull_request, run, send
from tests.support.cluster import Cluster
from tests.support.metrics import Scrape, scrape

pytestmark = pytest.mark.integration
# 10 queues, 3 slots of 2: base 1 2 3 4, slot 0 (v2) 0 5, slot 1 free 6 7, slot 2 (v3) 8 9
LANE_TOPIC = pb.TopicConfig(topic="LT", queue_nums=10, gray_queue_nums=2, perm=pb.PERM_READ_WRITE, lane_slots=3,
                            lanes={"v2": 0, "v3": 2})

BROKER_FAMILIES = {
    "graymq_broker_put_messages": "counter",
    "graymq_broker_put_bytes": "counter",
    "graymq_broker_put_rate": "gauge",
    "graymq_broker_get_messages": "counter",
    "graymq_broker_get_rate": "gauge",
    "graymq_broker_consumer_backlog": "gauge",
    "graymq_broker_flush": "counter",
    "graymq_broker_flush_seconds": "counter",
    "graymq_broker_last_flush_ms": "gauge",
    "graymq_broker_commitlog_max_offset": "gauge",
    "graymq_broker_clients": "gauge",
    "graymq_broker_long_polls": "gauge",
    "graymq_broker_rejected_connections": "counter",
    "graymq_broker_tls_handshake_failures": "counter",
    "graymq_broker_refused_requests": "counter",
    "graymq_broker_unauthenticated_closed": "counter",
    "graymq_broker_grpc_over_budget": "counter",
    "graymq_broker_grpc_malformed_requests": "counter",
    "graymq_broker_grpc_rejected_connections": "counter",
}
STORE_FAMILIES = {
    "graymq_store_damaged_records": "counter",
    "graymq_store_damaged_bytes": "counter",
    "graymq_store_bad_units": "counter",
    "graymq_store_unflushed_bytes": "gauge",
    "graymq_store_unflushed_age_seconds": "gauge",
}
NAMESERVER_FAMILIES = {
    "graymq_nameserver_http_requests": "counter",
    "graymq_nameserver_db_errors": "counter",
    "graymq_nameserver_open_watches": "gauge",
    "graymq_nameserver_client_beats": "counter",
    "graymq_nameserver_live_brokers": "gauge",
    "graymq_nameserver_live_clients": "gauge",
}


def graymq_families(metrics: Scrape, prefix: str) -> dict[str, str]:
    return {name: kind for name, kind in metrics.types.items() if name.startswith(prefix)}


def scrape_until(url: str, holds: Callable[[Scrape], bool], what: str, timeout: float = 15.0) -> Scrape:
    deadline = time.monotonic() + timeout
    while not holds(metrics := scrape(url)):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not hold within {timeout}s")
        time.sleep(0.1)
    return metrics


def test_broker_metrics_port_serves_prometheus_text_that_follows_sends_and_pulls(
    graymq_process: Callable[..., GraymqProcess], tmp_path: Path
) -> None:
    broker = graymq_process("broker", "--name", "broker-m", "--port", "0", "--store", str(tmp_path / "b"),
                            "--metrics-port", "0", "--segment-size", str(1 << 20))
    assert broker.ready_info is not None
    url = f"http://{broker.ready_info['metrics']}/metrics"
    before = scrape(url)
    assert graymq_families(before, "graymq_broker_") == BROKER_FAMILIES
    assert graymq_families(before, "graymq_store_") == STORE_FAMILIES
    assert before.value("graymq_store_damaged_records_total") == 0
    assert before.value("graymq_broker_put_messages_total", topic="MT", gray="false", lane="base") is None
    assert before.value("process_resident_memory_bytes")  # the process collector is registered too

    async def scenario(client: BrokerClient) -> int:
        await create_topic(client, broker.address, "MT", 6, 2)  # gray queues 0 and 5
        for body in (b"g1", b"g2"):
            assert (await send(client, broker.address, "MT", 0, body, gray=True)).status == pb.SEND_OK
        for body in (b"n1", b"n2", b"n3"):
            assert (await send(client, broker.address, "MT", 1, body)).status == pb.SEND_OK
        pulled = await client.pull(broker.address, pull_request("G", "c", "MT", 1, expression="*"))
        await client.update_offset(broker.address, "G", "MT", 1, 1)
        await client.update_topic(broker.address, LANE_TOPIC)
        for queue_id, body in ((8, b"v3-1"), (9, b"v3-2"), (0, b"v2")):
            assert (await send(client, broker.address, "LT", queue_id, body, gray=True)).status == pb.SEND_OK
        await client.update_offset(broker.address, "G", "LT", 8, 0)
        return sum(1 for _ in iter_records(pulled.records))

    assert run(scenario) == 3
    after = scrape_until(url, lambda m: bool(m.value("graymq_broker_put_rate", topic="MT", gray="false",
                                                     lane="base")), "a put rate for MT")
    assert after.value("graymq_broker_put_messages_total", topic="MT", gray="true", lane="gray") == 2
    assert after.value("graymq_broker_put_messages_total", topic="MT", gray="false", lane="base") == 3
    assert (after.value("graymq_broker_put_bytes_total", topic="MT", gray="false", lane="base") or 0) > 0
    assert after.value("graymq_broker_get_messages_total", topic="MT", gray="false", lane="base") == 3
    assert after.value("graymq_broker_consumer_backlog", group="G", topic="MT", queue="1", gray="false",
                       lane="base", side="normal") == 2
    # a topic of lanes: each lane's sends and backlog under its name
    assert after.value("graymq_broker_put_messages_total", topic="LT", gray="true", lane="v3") == 2
    assert after.value("graymq_broker_put_messages_total", topic="LT", gray="true", lane="v2") == 1
    assert after.value("graymq_broker_consumer_backlog", group="G", topic="LT", queue="8", gray="true",
                       lane="v3", side="gray") == 1
    assert before.value("graymq_broker_commitlog_max_offset") == 0
    assert (after.value("graymq_broker_commitlog_max_offset") or 0) > 0
    assert after.value("graymq_store_damaged_records_total") == 0
    assert after.value("graymq_broker_refused_requests_total") == 0  # dev mode: nothing refused
    assert (after.value("graymq_store_unflushed_bytes") or 0) >= 0


def test_nameserver_metrics_route_serves_prometheus_text_that_follows_requests(
    graymq_process: Callable[..., GraymqProcess], db: str, tmp_path: Path
) -> None:
    cluster = Cluster(graymq_process, db, tmp_path)
    cluster.start_nameserver()
    cluster.add_broker("broker-n")
    cluster.create_topic("NT", 4, 2)
    url = f"{cluster.ns_url}/metrics"
    route_lookups = {"method": "GET", "route": "/v1/topics/{topic}/route", "status": "200"}
    heartbeats = {"method": "POST", "route": "/v1/clients/heartbeat", "status": "200"}
    before = scrape(url)
    assert graymq_families(before, "graymq_nameserver_") == NAMESERVER_FAMILIES
    assert before.value("graymq_nameserver_live_brokers") == 1
    assert before.value("graymq_nameserver_db_errors_total") == 0
    assert before.value("graymq_nameserver_open_watches") == 0

    async def calls(ns: NameServerClient) -> None:
        await ns.get_route("NT")
        await ns.client_heartbeat({"group": "GN", "client_id": "c1", "role": "consumer"})

    cluster.ns_call(calls)
    after = scrape(url)
    for labels in (route_lookups, heartbeats):
        assert after.value("graymq_nameserver_http_requests_total", **labels) == (
            (before.value("graymq_nameserver_http_requests_total", **labels) or 0) + 1
        )
    assert after.value("graymq_nameserver_live_clients", group="GN", role="consumer", gray="false",
                       lane="base") == 1
    assert not any(name.endswith("_created") for name in after.types)
