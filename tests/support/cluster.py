"""A real graymq cluster for tests: a name server process (on the test's Postgres) and broker processes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from graymq.devkit.processes import GraymqProcess
from graymq.nameserver_api.client import NameServerClient

FAST_ENV = {
    "GRAYMQ_BROKER_REGISTER_INTERVAL_S": "0.5",
    "GRAYMQ_BROKER_CLIENT_EXPIRY_S": "10",
    "GRAYMQ_CLIENT_EXPIRY_SECONDS": "15",
    "GRAYMQ_DEV_MODE": "true",
    "GRAYMQ_ADMIN_TOKEN": "dev-token",
}


class Cluster:
    """Start with ``start_nameserver`` and ``add_broker``; topics via ``create_topic``."""

    def __init__(self, start: Callable[..., GraymqProcess], db_url: str, root: Path) -> None:
        self._start = start
        self.db_url = db_url
        self.root = root
        self.nameservers: list[GraymqProcess] = []
        self.brokers: dict[str, GraymqProcess] = {}

    def start_nameserver(self, **env: str) -> GraymqProcess:
        proc = self._start("nameserver", "--port", "0", "--db", self.db_url, "--migrate", "--dev",
                           env={**FAST_ENV, **env})
        self.nameservers.append(proc)
        return proc

    @property
    def ns_url(self) -> str:
        return ",".join(str(p.ready_info["url"]) for p in self.nameservers if p.ready_info)

    def add_broker(self, name: str, *extra: str, **env: str) -> GraymqProcess:
        proc = self._start("broker", "--name", name, "--port", "0", "--store", str(self.root / name),
                           "--nameserver", self.ns_url, "--segment-size", str(4 << 20), *extra,
                           env={**FAST_ENV, **env})
        self.brokers[name] = proc
        return proc

    def restart_broker(self, name: str, *extra: str) -> GraymqProcess:
        self.brokers[name].terminate()
        return self.add_broker(name, *extra)

    def admin(self) -> NameServerClient:
        return NameServerClient(self.ns_url, admin_token="dev-token")

    def create_topic(self, topic: str, queues: int, gray: int, timeout: float = 20.0, lanes: int = 1) -> None:
        """Create through the name server (with room for ``lanes`` lanes) and wait until every broker reports
        carrying it."""

        async def go() -> None:
            ns = self.admin()
            try:
                if lanes > 1:
                    await ns.put_topic_lanes(topic, queues, gray, lanes)
                else:
                    await ns.put_topic(topic, queues, gray)
                deadline = time.monotonic() + timeout
                while True:
                    brokers = await ns.request("GET", "/v1/brokers")
                    carrying = {b["broker_name"] for b in brokers if topic in b["topics"]}
                    if carrying >= set(self.brokers):  # every broker applied it and reported it back
                        return
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"topic {topic} not on every broker after {timeout}s")
                    await asyncio.sleep(0.2)
            finally:
                await ns.close()

        asyncio.run(go())

    def ns_call(self, fn: Callable[[NameServerClient], Any]) -> Any:
        async def go() -> Any:
            ns = self.admin()
            try:
                return await fn(ns)
            finally:
                await ns.close()

        return asyncio.run(go())


@contextmanager
def module_processes(root: Path) -> Iterator[Callable[..., GraymqProcess]]:
    """``start(*args, env=None, wait=True, timeout=60)``: a ``graymq`` process in ``root`` (ready unless ``wait`` is
    false); every process it started stops, last first, at exit."""
    started: list[GraymqProcess] = []

    def start(*args: str, env: dict[str, str] | None = None, wait: bool = True, timeout: float = 60.0
              ) -> GraymqProcess:
        proc = GraymqProcess(args, env=env, cwd=root)
        started.append(proc)
        if wait:
            proc.wait_ready(timeout)
        return proc

    try:
        yield start
    finally:
        for proc in reversed(started):
            proc.terminate()


@contextmanager
def one_broker_cluster(db_url: str, root: Path, topic: str, queues: int, gray: int) -> Iterator[Cluster]:
    """A name server, broker ``broker-a`` and ``topic``, shared by a module's tests; every process stops at exit."""
    with module_processes(root) as start:
        cluster = Cluster(start, db_url, root)
        cluster.start_nameserver()
        cluster.add_broker("broker-a")
        cluster.create_topic(topic, queues, gray)
        yield cluster
