"""Real `graymq nameserver` processes: replicas on one PostgreSQL, start-up refusals, SQLite quick start."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from nameserver_testkit import ADMIN_TOKENS, OPS, broker_heartbeat, client_heartbeat, wait_until

from graymq.devkit.ports import free_port
from graymq.devkit.processes import GraymqProcess

pytestmark = pytest.mark.integration

StartProcess = Callable[..., GraymqProcess]


def http(proc: GraymqProcess) -> httpx.Client:
    assert proc.ready_info is not None
    assert proc.ready_info["kind"] == "nameserver"
    assert proc.ready_info["url"] == f"http://{proc.address}"
    return httpx.Client(base_url=proc.ready_info["url"], headers=OPS, timeout=10)


def start_nameserver(graymq_process: StartProcess, db: str, **env: str) -> GraymqProcess:
    return graymq_process(
        "nameserver", "--port", "0", "--db", db,
        env={"GRAYMQ_ADMIN_TOKENS": ADMIN_TOKENS, "GRAYMQ_DEV_MODE": "false", **env}
    )


def exit_of(proc: GraymqProcess, timeout: float = 30) -> int:
    code = proc.proc.wait(timeout)
    proc.kill()  # joins the output reader
    return code


def test_a_flag_set_through_one_replica_is_read_through_the_other(
    graymq_process: StartProcess, db_url: str
) -> None:
    with (
        http(start_nameserver(graymq_process, db_url)) as a,
        http(start_nameserver(graymq_process, db_url)) as b,
    ):
        client_heartbeat(a, "replicated_group", "c1", labels={"version": "v2"})
        assert b.put(
            "/v1/groups/replicated_group/clients/c1/flag", json={"gray": True}, headers=OPS
        ).is_success
        (row,) = a.get("/v1/groups/replicated_group/clients").json()["clients"]
        assert (row["explicit_gray"], row["desired_gray"]) == (True, True)
        assert client_heartbeat(a, "replicated_group", "c1")["desired_gray"] is True
        b.put("/v1/groups/replicated_group/switch", json={"enabled": False}, headers=OPS)
        assert client_heartbeat(a, "replicated_group", "c1")["desired_gray"] is False


def test_a_broker_registered_through_one_replica_is_routed_by_the_other_until_its_lease_expires(
    graymq_process: StartProcess, db_url: str
) -> None:
    lease = {"GRAYMQ_BROKER_LEASE_SECONDS": "1"}
    a_proc = start_nameserver(graymq_process, db_url, **lease)
    b_proc = start_nameserver(graymq_process, db_url, **lease)
    with http(a_proc) as a, http(b_proc) as b:

        def routed_and_listed_by_b() -> bool:
            """Both read right after a heartbeat: the lease is 1 s, which a loaded machine can outlast between
            two reads (CI once listed no broker on the line after the route was seen)."""
            broker_heartbeat(a, "lease_broker", ("LEASE_TOPIC", 4, 2))
            response = b.get("/v1/topics/LEASE_TOPIC/route")
            return (response.status_code == 200
                    and [x["broker_name"] for x in response.json()["brokers"]] == ["lease_broker"]
                    and "lease_broker" in {x["broker_name"] for x in b.get("/v1/brokers").json()})

        wait_until(routed_and_listed_by_b, what="route and listing through the other replica")
        # No more heartbeats: the lease runs out and the broker vanishes from both replicas.
        wait_until(lambda: b.get("/v1/topics/LEASE_TOPIC/route").status_code == 404, what="lease expiry")
        assert (
            a.get("/v1/topics/LEASE_TOPIC/route").json()["error"] == "no live broker serves topic LEASE_TOPIC"
        )
        assert a.get("/v1/brokers").json() == []


def test_refuses_to_start_on_an_unmigrated_database_until_migrated(
    graymq_process: StartProcess, postgres: object
) -> None:
    url = postgres.create_database("t_ns_unmigrated")  # type: ignore[attr-defined]
    refused = graymq_process(
        "nameserver", "--port", "0", "--db", url, env={"GRAYMQ_ADMIN_TOKENS": ADMIN_TOKENS}, wait=False
    )
    assert exit_of(refused) == 2
    assert "graymq nameserver migrate" in refused.output
    assert refused.ready_info is None

    migrate = subprocess.run(
        [sys.executable, "-m", "graymq.gray_controller.cli", "nameserver", "migrate", "--db", url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert migrate.returncode == 0, migrate.stderr
    with http(start_nameserver(graymq_process, url)) as api:
        assert api.get("/readyz").json() == {"status": "ready"}


def test_replicas_started_together_with_migrate_upgrade_an_empty_database_once(
    graymq_process: StartProcess, postgres: object
) -> None:
    url = postgres.create_database("t_ns_automigrate")  # type: ignore[attr-defined]
    env = {"GRAYMQ_ADMIN_TOKENS": ADMIN_TOKENS}
    replicas = [
        graymq_process("nameserver", "--port", "0", "--db", url, "--migrate", env=env, wait=False)
        for _ in range(3)
    ]
    for proc in replicas:
        proc.wait_ready()
        with http(proc) as api:
            assert api.get("/v1/groups").json() == []


@pytest.mark.parametrize(
    ("tokens", "message"),
    [("", "no admin tokens configured"), ("ops=dev-token", "only accepted in dev mode")],
    ids=["no-tokens", "dev-token-configured"],
)
def test_refuses_to_start_outside_dev_mode_without_a_real_token(
    graymq_process: StartProcess, db_url: str, tokens: str, message: str
) -> None:
    proc = graymq_process(
        "nameserver", "--port", "0", "--db", db_url, env={"GRAYMQ_ADMIN_TOKENS": tokens, "GRAYMQ_DEV_MODE": "false"},
        wait=False
    )
    assert exit_of(proc) == 2
    assert message in proc.output


def test_dev_token_is_accepted_only_in_dev_mode(graymq_process: StartProcess, db_url: str) -> None:
    with http(start_nameserver(graymq_process, db_url)) as prod:
        dev_headers = {"Authorization": "Bearer dev-token"}
        assert prod.put("/v1/topics/DEV_T", json={"queue_nums": 4}, headers=dev_headers).status_code == 401
    dev_proc = graymq_process(
        "nameserver", "--port", "0", "--db", db_url, "--dev", env={"GRAYMQ_ADMIN_TOKENS": ""}
    )
    with http(dev_proc) as dev:
        assert dev.put("/v1/topics/DEV_T", json={"queue_nums": 4}, headers=dev_headers).status_code == 201
        (entry,) = dev.get("/v1/audit", params={"object_type": "topic", "object_id": "DEV_T"}).json()
        assert entry["actor"] == "dev"


@pytest.mark.parametrize("db", ["mysql://u@h/db", "not a url", "sqlite://", "postgresql+asyncpg://u@h/db"])
def test_a_bad_database_url_is_a_clear_error_with_exit_code_2(graymq_process: StartProcess, db: str) -> None:
    proc = graymq_process("nameserver", "--port", "0", "--db", db, "--dev", wait=False)
    assert exit_of(proc) == 2
    assert "--db / GRAYMQ_DB_URL" in proc.output
    assert "Traceback" not in proc.output


def test_sqlite_quick_start_serves_and_stops_cleanly_on_sigterm(
    graymq_process: StartProcess, tmp_path: Path
) -> None:
    proc = graymq_process("nameserver", "--port", "0", "--dev", "--migrate")
    assert (
        tmp_path / "graymq-data" / "nameserver.db"
    ).is_file()  # the default DB, under the working directory
    with http(proc) as api:
        dev = {"Authorization": "Bearer dev-token"}
        assert (
            api.put("/v1/topics/QUICK", json={"queue_nums": 4, "gray_queue_nums": 2}, headers=dev).status_code
            == 201
        )
        broker_heartbeat(api, "b1", ("QUICK", 4, 2))
        assert [b["broker_name"] for b in api.get("/v1/topics/QUICK/route").json()["brokers"]] == ["b1"]
        client_heartbeat(api, "quick_group", "c1")
        assert api.put("/v1/groups/quick_group/clients/c1/flag", json={"gray": True}, headers=dev).is_success
        assert client_heartbeat(api, "quick_group", "c1")["desired_gray"] is True
    assert proc.terminate() == 0
    assert proc.output.count("graymq-ready ") == 1


def test_an_unreachable_database_at_start_is_exit_code_1(graymq_process: StartProcess) -> None:
    url = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/nowhere"
    proc = graymq_process("nameserver", "--port", "0", "--db", url, "--dev", wait=False)
    assert exit_of(proc) == 1
    assert "cannot reach the database" in proc.output


def test_a_taken_port_is_exit_code_1(graymq_process: StartProcess, db_url: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        proc = graymq_process("nameserver", "--port", port, "--db", db_url, "--dev", wait=False)
        assert exit_of(proc) == 1
    assert f"cannot listen on 127.0.0.1:{port}" in proc.output


@pytest.mark.parametrize(("level", "shows_steps"), [(None, True), ("WARNING", False)])
def test_migrate_logs_its_steps_at_the_configured_level(tmp_path: Path, level: str | None, shows_steps: bool) -> None:
    env = {k: v for k, v in os.environ.items() if k != "GRAYMQ_LOG_LEVEL"}
    if level:
        env["GRAYMQ_LOG_LEVEL"] = level
    migrate = subprocess.run(
        [sys.executable, "-m", "graymq.gray_controller.cli", "nameserver", "migrate", "--db", f"sqlite:///{tmp_path}/ns.db"],
        capture_output=True, text=True, timeout=120, env=env,
    )
    assert migrate.returncode == 0, migrate.stderr
    assert "is up to date" in migrate.stdout
    assert ("Running upgrade" in migrate.stderr) is shows_steps, migrate.stderr


def test_migrate_refuses_an_unknown_log_level(tmp_path: Path) -> None:
    db = tmp_path / "ns.db"
    migrate = subprocess.run(
        [sys.executable, "-m", "graymq.gray_controller.cli", "nameserver", "migrate", "--db", f"sqlite:///{db}"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "GRAYMQ_LOG_LEVEL": "chatty"},
    )
    assert migrate.returncode == 2
    assert "log level 'CHATTY' (GRAYMQ_LOG_LEVEL): expected one of DEBUG, INFO" in migrate.stderr
    assert "Traceback" not in migrate.stderr
    assert not db.exists()  # refused before touching the database
