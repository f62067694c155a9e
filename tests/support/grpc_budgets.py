"""A flood of Telemetry streams from one principal against a broker outside dev mode, measured from another: its gRPC
sends and its broker-port sends (acknowledged, p99 quiet and during the flood) and the broker's RSS (before, during,
after). Shared by the bounded test (``make test``) and the full floods (``make chaos``)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from graymq.devkit.processes import GraymqProcess
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.broker_client import split_address
from graymq.protocol.connection import Connection
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from graymq.protocol.rocketmq_v2 import service_pb2 as v2s
from graymq.protocol.rocketmq_v2 import service_pb2_grpc
from tests.support.grpc_flood import signed
from tests.support.metrics import scrape
from tests.support.trust import StartProcess, add_principal, start_secure_grpc_broker, start_secure_nameserver

TOPIC = "ORDER_PAID"
PROBES = 200  # sends per p99 measure, after WARMUP
SETTLE_S = 3.0  # after the flood's streams were answered: their registrations' first heartbeat round (one interval)
WARMUP = 10


def rss_mib(pid: int) -> float:
    """A process's resident set (VmRSS), in MiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1]) / 1024


def p99(latencies: list[float]) -> float:
    ordered = sorted(latencies)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


async def grpc_sends(endpoint: str, token: str, client_id: str) -> tuple[int, float]:
    """(sends acknowledged OK, p99 seconds) of ``PROBES`` sequential stock sends after ``WARMUP``."""
    async with grpc.aio.insecure_channel(endpoint) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        latencies, ok = [], 0
        for i in range(WARMUP + PROBES):
            message = v2.Message(topic=v2.Resource(name=TOPIC), body=b"probe", system_properties=v2.SystemProperties(
                message_id=f"01{uuid.uuid4().hex.upper()}", body_encoding=v2.IDENTITY, message_type=v2.NORMAL))
            started = time.perf_counter()
            answer = await stub.SendMessage(v2s.SendMessageRequest(messages=[message]),
                                            metadata=signed(token, client_id), timeout=30)
            if i >= WARMUP:
                latencies.append(time.perf_counter() - started)
                ok += answer.status.code == v2.OK
        return ok, p99(latencies)


async def broker_sends(address: str, token: str) -> tuple[int, float]:
    """(sends acknowledged SEND_OK, p99 seconds) of ``PROBES`` sequential sends on the broker port."""
    host, port = split_address(address)
    conn = await Connection.open(host, port, timeout=10)
    try:
        await conn.request(pb.AUTHENTICATE, pb.AuthenticateRequest(token=token), 10)
        latencies, ok = [], 0
        for i in range(WARMUP + PROBES):
            request = pb.SendRequest(producer_group="payments", queue_id=1,
                                     message=pb.Message(topic=TOPIC, body=b"probe"))
            started = time.perf_counter()
            answer = await conn.request(pb.SEND_MESSAGE, request, 30)
            if i >= WARMUP:
                latencies.append(time.perf_counter() - started)
                ok += answer.status == pb.SEND_OK  # type: ignore[attr-defined]
        return ok, p99(latencies)
    finally:
        await conn.close()


@dataclass
class Figures:
    streams: int
    quiet: dict[str, tuple[int, float]] = field(default_factory=dict)  # probe -> (acked, p99 s)
    flood: dict[str, tuple[int, float]] = field(default_factory=dict)
    answers: dict[str, Any] = field(default_factory=dict)  # the flood's first answers, by status code
    rss_mib: dict[str, float] = field(default_factory=dict)  # before, during, after
    over_budget: dict[str, float] = field(default_factory=dict)  # budget -> refusals counted

    def check_answers(self, admitted: int) -> None:
        """Every stream answered in time: ``admitted`` with their settings, the rest refused over a budget (as the
        metric counts them) or ended by gRPC itself (``grpc_*``: a refused stream's end racing the flooder's write)."""
        answers = {k: v for k, v in self.answers.items() if not k.startswith("detail_")}
        assert "no_answer" not in answers and answers["seconds"] < 60, self.report()
        assert answers.get("OK") == admitted, self.report()
        refused = answers.get("TOO_MANY_REQUESTS", 0)
        assert refused + sum(v for k, v in answers.items() if k.startswith("grpc_")) == self.streams - admitted, \
            self.report()
        assert sum(self.over_budget.values()) >= refused > 0, self.report()

    def report(self) -> str:
        lines = [f"gRPC flood of {self.streams} streams from one principal: first answers {self.answers}"]
        for probe in self.quiet:
            (q_ok, q_p99), (f_ok, f_p99) = self.quiet[probe], self.flood[probe]
            lines.append(f"  {probe}: quiet {q_ok}/{PROBES} acked p99 {q_p99 * 1000:.1f} ms; flood {f_ok}/{PROBES} "
                         f"acked p99 {f_p99 * 1000:.1f} ms ({f_p99 / q_p99:.1f}x)")
        lines.append("  broker RSS MiB: " + ", ".join(f"{k} {v:.0f}" for k, v in self.rss_mib.items()))
        lines.append(f"  refused over budget: {self.over_budget}")
        return "\n".join(lines)


def flood_broker(start: StartProcess, pg_url: str, store: Path, **env: str) -> tuple[GraymqProcess, str, str, str]:
    """A broker outside dev mode serving gRPC, with ``TOPIC``; (broker, gRPC endpoint, the flooder's token, another
    principal's token), both principals producing to ``ORDER_*`` and consuming it, the flooder as ``GID_FLOOD`` and the
    other as ``GID_PAYMENTS``."""
    ns_url = start_secure_nameserver(start, pg_url)
    broker_token = add_principal(ns_url, "broker-a", "--broker")
    flooder = add_principal(ns_url, "flooder", "--produce", "ORDER_*", "--consume", "GID_FLOOD:ORDER_*")
    payments = add_principal(ns_url, "payments", "--produce", "ORDER_*", "--consume", "GID_PAYMENTS:ORDER_*")
    # the broker's own heartbeat interval (3 s), not the trust tests' 0.5 s: registrations beat as in a fleet
    settings = {f"GRAYMQ_BROKER_{k.upper()}": v for k, v in {"register_interval_s": "3", **env}.items()}
    broker, endpoint = start_secure_grpc_broker(start, ns_url, broker_token, store, TOPIC,
                                                GRAYMQ_BROKER_METRICS_PORT="0", **settings)
    return broker, endpoint, flooder, payments


def measure_flood(broker: GraymqProcess, endpoint: str, flooder: str, other: str, streams: int,
                  per_connection: int = 50) -> Figures:
    """Quiet probes, then ``streams`` streams held by the flooder's process while the probes run again (from one
    heartbeat interval after the streams were answered), then the flood's end: the broker's RSS is read before, during
    and after (once within 20 % of before, or after 30 s)."""
    figures = Figures(streams)
    probes = {"grpc": lambda: grpc_sends(endpoint, other, "payments@1@0@probe"),
              "broker port": lambda: broker_sends(broker.address, other)}
    for name, probe in probes.items():
        figures.quiet[name] = asyncio.run(probe())
    pid = broker.proc.pid
    start_rss = figures.rss_mib["before"] = rss_mib(pid)
    holder = subprocess.Popen([sys.executable, "-m", "tests.support.grpc_flood", endpoint, flooder, TOPIC,
                               str(streams), str(per_connection)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout is not None
        figures.answers = json.loads(holder.stdout.readline() or "{}")
        time.sleep(SETTLE_S)  # measured while the streams are held, past their first heartbeats
        for name, probe in probes.items():
            figures.flood[name] = asyncio.run(probe())
        figures.rss_mib["during"] = rss_mib(pid)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(30)
    deadline = time.monotonic() + 30
    while rss_mib(pid) > start_rss * 1.2 and time.monotonic() < deadline:
        time.sleep(0.5)
    figures.rss_mib["after"] = rss_mib(pid)
    metrics = scrape(f"http://{broker.ready_info['metrics']}/metrics")  # type: ignore[index]
    figures.over_budget = {budget: value for budget in ("streams_per_connection", "client_ids_per_principal",
                                                        "streams_per_principal", "registrations_per_principal")
                           if (value := metrics.value("graymq_broker_grpc_over_budget_total", budget=budget))}
    return figures
