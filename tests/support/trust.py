"""A name server and brokers with authentication on (PostgreSQL, real principals), for the trust tests."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable

import httpx

from graymq.devkit.processes import GraymqProcess
from tests.support.cli import wait_for

ADMIN = "admin-secret-0123456789"
StartProcess = Callable[..., GraymqProcess]
SECURE_ENV = {"GRAYMQ_DEV_MODE": "false", "GRAYMQ_ADMIN_TOKENS": f"ops={ADMIN}", "GRAYMQ_ADMIN_TOKEN": "",
              "GRAYMQ_TOKEN": "", "GRAYMQ_BROKER_TOKEN": "", "GRAYMQ_BROKER_REGISTER_INTERVAL_S": "0.5"}


def closed_by_broker(sock: socket.socket, timeout: float = 15.0) -> bool:
    """Whether the broker closes ``sock`` within ``timeout`` (reads until EOF or a reset)."""
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionError:
        pass
    return True


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def cli(ns_url: str, *args: str, token: str | None = None, admin: str | None = ADMIN,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``graymq ARGS --nameserver URL`` with exactly the tokens given (unset otherwise)."""
    env = {k: v for k, v in os.environ.items() if k not in ("GRAYMQ_TOKEN", "GRAYMQ_ADMIN_TOKEN", "GRAYMQ_DEV_MODE")}
    if token is not None:
        env["GRAYMQ_TOKEN"] = token
    if admin is not None:
        env["GRAYMQ_ADMIN_TOKEN"] = admin
    return subprocess.run([sys.executable, "-m", "graymq.gray_controller.cli", *args, "--nameserver", ns_url],
                          capture_output=True, text=True, timeout=timeout, env=env)


def add_principal(ns_url: str, name: str, *rights: str) -> str:
    result = cli(ns_url, "principal", "add", name, *rights, "--json")
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["name"] == name
    return str(answer["token"])


def start_secure_nameserver(start: StartProcess, db_url: str, **env: str) -> str:
    proc = start("nameserver", "--port", "0", "--db", db_url, "--migrate", env={**SECURE_ENV, **env})
    assert proc.ready_info is not None
    return str(proc.ready_info["url"])


def start_secure_broker(start: StartProcess, ns_url: str, name: str, token: str, store: object,
                        **env: str) -> GraymqProcess:
    """A broker outside dev mode with its broker token, once the name server lists it."""
    proc = start("broker", "--name", name, "--port", "0", "--store", str(store), "--nameserver", ns_url,
                 env={**SECURE_ENV, "GRAYMQ_BROKER_TOKEN": token, **env})

    def registered() -> bool:
        brokers = httpx.get(f"{ns_url}/v1/brokers", headers=bearer(ADMIN), timeout=5).json()
        return name in [b["broker_name"] for b in brokers]

    wait_for(registered, 30, f"{name} registered with its broker token")
    return proc


def carried_topics(ns_url: str) -> set[str]:
    """Every topic the name server's brokers carry."""
    brokers = httpx.get(f"{ns_url}/v1/brokers", headers=bearer(ADMIN), timeout=5).json()
    return {topic for b in brokers for topic in b["topics"]}


def start_secure_grpc_broker(start: StartProcess, ns_url: str, token: str, store: object, topic: str,
                             **env: str) -> tuple[GraymqProcess, str]:
    """``broker-a`` outside dev mode serving gRPC on a free port, with ``topic`` created (4 queues, 2 gray) and
    carried by it; the broker and its gRPC endpoint."""
    broker = start_secure_broker(start, ns_url, "broker-a", token, store, GRAYMQ_BROKER_GRPC_PORT="0", **env)
    assert broker.ready_info is not None
    created = cli(ns_url, "topic", "create", topic, "--queues", "4", "--gray-queues", "2")
    assert created.returncode == 0, created.stderr
    wait_for(lambda: topic in carried_topics(ns_url), 20, f"{topic} on {ns_url}'s broker-a")
    return broker, str(broker.ready_info["grpc"])
