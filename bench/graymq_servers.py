"""graymq processes for the benchmarks: a standalone broker, or a name server (SQLite) with brokers.

Brokers are real ``graymq broker`` processes (their peak RSS is what the tables show); the
name server runs on SQLite as ``graymq up`` does, started here directly so a broker can be
given ``--flush sync``. Both run in dev mode unless asked to authenticate (``secure=True``,
``dev=False``), and a broker serves TLS when given a certificate and key.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Self

from graymq.bench.common import Server, graymq_command
from graymq.nameserver_api.client import NameServerClient
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.broker_client import BrokerClient
from graymq.protocol.errors import GrayMQError

READY = "graymq-ready "
ADMIN_TOKEN = "dev-token"
ENV = {
    "GRAYMQ_LOG_LEVEL": "WARNING",
    "GRAYMQ_DEV_MODE": "true",
    "GRAYMQ_ADMIN_TOKEN": ADMIN_TOKEN,
    "GRAYMQ_BROKER_REGISTER_INTERVAL_S": "0.5",
    "PYTHONUNBUFFERED": "1",
}
SECURE_ADMIN_TOKEN = "bench-admin-0123456789abcdef"
SECURE_ENV = {**ENV, "GRAYMQ_DEV_MODE": "false", "GRAYMQ_ADMIN_TOKENS": f"bench={SECURE_ADMIN_TOKEN}",
              "GRAYMQ_ADMIN_TOKEN": SECURE_ADMIN_TOKEN}


class Broker(Server):
    """``graymq broker`` with its store under ``store_dir``; ``address`` once ready.

    ``dev=False``: authentication on (needs ``nameserver`` and ``broker_token``, a principal with the broker
    right); ``tls``: ``(cert, key)`` PEM files, the port then speaks TLS only; ``uvloop``: the same broker on uvloop;
    ``grpc``: it also serves stock RocketMQ 5 clients (``grpc_address`` once ready); ``env``: more settings
    (``GRAYMQ_BROKER_*``).
    """

    def __init__(self, name: str, store_dir: Path, log_dir: Path, *, flush: str = "async",
                 nameserver: str | None = None, dev: bool = True, broker_token: str = "",
                 tls: tuple[Path, Path] | None = None, uvloop: bool = False, grpc: bool = False,
                 env: dict[str, str] | None = None) -> None:
        args = ["broker", "--name", name, "--port", "0", "--store", str(store_dir), "--flush", flush,
                "--segment-size", str(256 << 20), *(["--grpc-port", "0"] if grpc else [])]
        if nameserver:
            args += ["--nameserver", nameserver]
        if tls:
            args += ["--tls-cert", str(tls[0]), "--tls-key", str(tls[1])]
        env = {**ENV, "GRAYMQ_DEV_MODE": "true" if dev else "false", "GRAYMQ_BROKER_TOKEN": broker_token, **(env or {})}
        on_uvloop = [sys.executable, "-m", "graymq.gray_controller.cli.uvloop", *args]
        command = on_uvloop if uvloop else graymq_command(*args)
        super().__init__(f"broker-{name}", command, log_dir, env=env, ready_prefix=READY)
        self.address = self.grpc_address = ""

    def wait_ready(self, timeout_s: float = 60.0) -> Self:
        super().wait_ready(timeout_s)
        ready = json.loads(self.ready_line)
        self.address, self.grpc_address = ready["address"], ready.get("grpc", "")
        return self


class NameServer(Server):
    """``graymq nameserver``, migrated, on ``db_url`` or a SQLite file: in dev mode (admin token ``dev-token``),
    or with ``secure=True`` authenticating every call (admin token ``SECURE_ADMIN_TOKEN``)."""

    def __init__(self, data_dir: Path, log_dir: Path, db_url: str | None = None, *, secure: bool = False) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        db_url = db_url or f"sqlite:///{data_dir / 'nameserver.db'}"
        args = ["nameserver", "--port", "0", "--db", db_url, "--migrate", *([] if secure else ["--dev"])]
        super().__init__("nameserver", graymq_command(*args), log_dir, env=SECURE_ENV if secure else ENV,
                         ready_prefix=READY)
        self.admin_token = SECURE_ADMIN_TOKEN if secure else ADMIN_TOKEN
        self.db_url = db_url
        self.url = ""

    def wait_ready(self, timeout_s: float = 60.0) -> Self:
        super().wait_ready(timeout_s)
        self.url = json.loads(self.ready_line)["url"]
        return self

    def admin(self) -> NameServerClient:
        return NameServerClient(self.url, admin_token=self.admin_token, timeout_s=15.0)

    def create_topic(self, topic: str, queues: int, gray: int, brokers: set[str]) -> None:
        """``create_topic`` from outside an event loop, with an admin client of its own."""
        async def create() -> None:
            admin = self.admin()
            try:
                await create_topic(admin, topic, queues, gray, brokers)
            finally:
                await admin.close()

        asyncio.run(create())


async def create_topic_on_broker(address: str, topic: str, queues: int, gray: int = 0) -> None:
    """UPDATE_TOPIC straight to a standalone broker."""
    client = BrokerClient()
    try:
        await client.update_topic(address, pb.TopicConfig(topic=topic, queue_nums=queues, gray_queue_nums=gray,
                                                          perm=pb.PERM_READ_WRITE))
    finally:
        await client.close()


async def create_topic(ns: NameServerClient, topic: str, queues: int, gray: int, brokers: set[str],
                       timeout_s: float = 30.0, lane_slots: int = 1) -> None:
    """Create through the name server (room for ``lane_slots`` lanes) and wait until the route names exactly
    ``brokers``.

    Until a broker reports a new topic, the name server routes it to every live broker — brokers
    stopped by earlier cases included, while their lease lasts — so "contains ours" is not enough.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            await ns.put_topic_lanes(topic, queues, gray, lane_slots)
            break
        except GrayMQError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)
    while True:
        try:
            route = await ns.request("GET", f"/v1/topics/{topic}/route")
            if {b["broker_name"] for b in route["brokers"]} == brokers:
                await asyncio.sleep(0.6)  # one more registration round: the broker applied the config
                return
        except GrayMQError:
            pass  # not routable yet; retried until the deadline
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {topic} not routed to exactly {sorted(brokers)} after {timeout_s}s")
        await asyncio.sleep(0.1)
