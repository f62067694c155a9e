"""A broker set deployed as the README and the Helm chart say — every replica with the name server's bootstrap
broker token (GRAYMQ_BROKER_TOKENS), or with a broker principal's bound to the set's name — on real processes with
authentication on: the follower authenticates to its leader, reaches its log end and acknowledges sync sends; a
follower that falls out of the in-sync set makes the leader say so (WARNING, metric) while sync sends go on with
one copy, as documented."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from graymq.devkit.processes import GraymqProcess
from graymq.protocol import graymq_pb2 as pb
from tests.support.broker import send
from tests.support.cli import wait_for
from tests.support.metrics import scrape
from tests.support.trust import ADMIN, SECURE_ENV, StartProcess, add_principal, bearer, cli, start_secure_nameserver

pytestmark = pytest.mark.integration

BOOTSTRAP = "brokers-bootstrap-secret-0123456789"
NAME = "broker-rs"
TOPIC = "ORDER_RS"


def replica_set(ns_url: str) -> dict[str, Any] | None:
    brokers = httpx.get(f"{ns_url}/v1/brokers", headers=bearer(ADMIN), timeout=5).json()
    return next((b["replica_set"] for b in brokers if b["broker_name"] == NAME and b["replica_set"]), None)


def start_replica(start: StartProcess, ns_url: str, replica: int, store: Path, token: str) -> GraymqProcess:
    return start("broker", "--name", NAME, "--replica-id", str(replica), "--replication", "sync", "--port", "0",
                 "--store", str(store), "--nameserver", ns_url,
                 env={**SECURE_ENV, "GRAYMQ_BROKER_TOKEN": token, "GRAYMQ_BROKER_METRICS_PORT": "0",
                      "GRAYMQ_BROKER_REPLICA_LAG_S": "1"})


def sends(token: str, address: str, count: int) -> list[pb.SendResponse]:
    from graymq.protocol.broker_client import BrokerClient

    async def main() -> list[pb.SendResponse]:
        client = BrokerClient(token=token, tls=False)
        try:
            return [await send(client, address, TOPIC, i % 2, b"m") for i in range(count)]
        finally:
            await client.close()

    return asyncio.run(main())


def log_end(token: str, address: str) -> int:
    from graymq.protocol.broker_client import BrokerClient

    async def main() -> int:
        client = BrokerClient(token=token, tls=False)
        try:
            return sum([await client.max_offset(address, TOPIC, q) for q in (0, 1)])
        finally:
            await client.close()

    return asyncio.run(main())


@pytest.mark.parametrize("credential", ["bootstrap", "principal"])
def test_a_replicated_set_with_its_broker_token_is_in_sync_and_says_so_when_it_is_not(
    graymq_process: StartProcess, fresh_pg_url: str, tmp_path: Path, credential: str
) -> None:
    ns_url = start_secure_nameserver(graymq_process, fresh_pg_url, GRAYMQ_BROKER_TOKENS=f"brokers={BOOTSTRAP}",
                                     GRAYMQ_REPLICA_LEASE_SECONDS="2")
    token = BOOTSTRAP if credential == "bootstrap" else add_principal(ns_url, NAME, "--broker")  # bound to NAME
    leader = start_replica(graymq_process, ns_url, 0, tmp_path / "r0", token)
    wait_for(lambda: (replica_set(ns_url) or {}).get("leader_replica_id") == 0, 30, "replica 0 leading")
    assert cli(ns_url, "topic", "create", TOPIC, "--queues", "2").returncode == 0
    orders = add_principal(ns_url, "orders", "--produce", "ORDER_*")
    assert all(r.status == pb.SEND_OK for r in sends(orders, leader.address, 10))  # before the follower exists
    follower = start_replica(graymq_process, ns_url, 1, tmp_path / "r1", token)

    # the follower authenticates to the leader with its token, copies its log and joins the in-sync set
    wait_for(lambda: (replica_set(ns_url) or {}).get("in_sync") == [0, 1], 30, "replica 1 in sync")
    assert "invalid token" not in follower.output
    answers = sends(orders, leader.address, 20)  # a producer on the follower's address is not throttled
    assert all(r.status == pb.SEND_OK for r in answers)
    assert log_end(ADMIN, follower.address) == 30  # acknowledged means stored by both
    leader_metrics = f"http://{leader.ready_info['metrics']}/metrics"  # type: ignore[index]
    assert scrape(leader_metrics).value("graymq_broker_replica_out_of_sync") == 0

    # the follower stops: it leaves the in-sync set, the leader warns and counts it, sync sends go on, one copy
    follower.kill()
    wait_for(lambda: (replica_set(ns_url) or {}).get("in_sync") == [0], 30, "replica 1 out of the in-sync set")
    line = leader.wait_for_line("not in sync: replica 1", timeout=30)
    assert "WARNING" in line and "sync sends are acknowledged with 1 copy" in line
    wait_for(lambda: scrape(leader_metrics).value("graymq_broker_replica_out_of_sync") == 1, 30, "the metric")
    assert all(r.status == pb.SEND_OK for r in sends(orders, leader.address, 5))


def test_a_replica_whose_token_does_not_cover_its_replica_id_says_who_what_and_how_to_fix_it_in_one_line(
        graymq_process: StartProcess, fresh_pg_url: str, tmp_path: Path) -> None:
    ns_url = start_secure_nameserver(graymq_process, fresh_pg_url)
    token = add_principal(ns_url, "rs-one", "--broker", "--broker-name", f"{NAME}:1")
    replica = start_replica(graymq_process, ns_url, 0, tmp_path / "r0", token)
    refusal = (f"principal rs-one may not register as replica 0 of broker {NAME} (its broker names: {NAME}:1): "
               f"graymq principal add NAME --broker --broker-name {NAME}:0")
    assert refusal in replica.wait_for_line("takes no part in its set")
    assert refusal in replica.wait_for_line("not serving any route")
    assert "developer.mozilla.org" not in replica.output and "serving on" not in replica.output
