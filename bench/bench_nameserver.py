"""Name server latency: flag flips and group lookups against a real process on a throwaway PostgreSQL.

    .venv/bin/python -m graymq.bench.bench_nameserver [--clients 200] [--calls 300]

Starts its own PostgreSQL (as the tests do), migrates it, starts ``graymq nameserver`` on a free
port, registers the clients by heartbeat, then times sequential calls from one HTTP client:
``PUT .../flag`` (each flip locks the group row and writes an audit entry) and
``GET /v1/groups/{group}/clients`` (what every consumer's rebalance asks).
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import httpx

from graymq.devkit.postgres import PostgresServer
from graymq.devkit.processes import GraymqProcess
from graymq.migrations.schema import upgrade

GROUP = "bench_group"
TOKEN = "bench-secret"


def percentile(samples: list[float], q: float) -> float:
    """Nearest-rank percentile of ``samples`` (0 < q <= 1)."""
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def timed(calls: int, call: Callable[[int], httpx.Response]) -> list[float]:
    """Milliseconds per call; every call must succeed."""
    samples = []
    for i in range(calls):
        start = time.perf_counter()
        response = call(i)
        samples.append((time.perf_counter() - start) * 1000)
        response.raise_for_status()
    return samples


def report(name: str, samples: list[float], quiet: bool = False) -> dict[str, float]:
    p50, p99 = percentile(samples, 0.50), percentile(samples, 0.99)
    if not quiet:
        print(f"{name:<38} {len(samples):>6} {p50:>9.2f} {p99:>9.2f} {max(samples):>9.2f}")
    return {"calls": len(samples), "p50_ms": p50, "p99_ms": p99, "max_ms": max(samples)}


def run(http: httpx.Client, clients: int, calls: int, quiet: bool = False) -> dict[str, dict[str, float]]:
    """Register ``clients`` then time the calls, every one authenticated; figures per operation (p50/p99/max ms)."""
    admin = {"Authorization": f"Bearer {TOKEN}"}

    def heartbeat(i: int) -> httpx.Response:
        labels = {"version": "v2" if i % 4 == 0 else "v1", "zone": f"z{i % 3}"}
        body = {
            "group": GROUP,
            "client_id": f"client-{i:04d}",
            "role": "consumer",
            "labels": labels,
            "topics": ["BENCH_TOPIC"],
            "queues": [f"BENCH_TOPIC@broker-a:{i % 16}"],
        }
        return http.post("/v1/clients/heartbeat", json=body, headers=admin)

    def flip(i: int) -> httpx.Response:
        body = {"gray": i % 2 == 0, "reason": "bench"}
        return http.put(f"/v1/groups/{GROUP}/clients/client-{i % clients:04d}/flag", json=body, headers=admin)

    def lookup(_i: int) -> httpx.Response:
        return http.get(f"/v1/groups/{GROUP}/clients", headers=admin)

    http.put(
        "/v1/topics/BENCH_TOPIC", json={"queue_nums": 16, "gray_queue_nums": 4}, headers=admin
    ).raise_for_status()
    rule = {"selector": {"version": "v2"}, "gray": True}
    http.post(f"/v1/groups/{GROUP}/rules", json=rule, headers=admin).raise_for_status()
    registrations = timed(clients, heartbeat)
    listed = lookup(0).json()["clients"]
    assert len(listed) == clients, f"expected {clients} live clients, the name server lists {len(listed)}"
    timed(20, flip)  # warm-up: connection pool, statement caches
    timed(20, lookup)

    if not quiet:
        print(f"\nname server on PostgreSQL, group of {clients} clients, {calls} sequential calls each\n")
        print(f"{'operation':<38} {'calls':>6} {'p50 ms':>9} {'p99 ms':>9} {'max ms':>9}")
    return {
        "heartbeat (register)": report("POST /v1/clients/heartbeat (register)", registrations, quiet),
        "flag flip": report("PUT  .../clients/{id}/flag", timed(calls, flip), quiet),
        f"group lookup ({clients} clients)": report(f"GET  /v1/groups/{{group}}/clients ({clients})",
                                                     timed(calls, lookup), quiet),
    }


def measure(postgres: PostgresServer, database: str, clients: int, calls: int,
            quiet: bool = True) -> dict[str, dict[str, float]]:
    """On a new database of a running ``postgres``: migrate, start a name server, ``run``."""
    url = postgres.create_database(database)
    upgrade(url)
    env = {"GRAYMQ_ADMIN_TOKENS": f"bench={TOKEN}", "GRAYMQ_LOG_LEVEL": "WARNING"}
    with GraymqProcess(["nameserver", "--port", "0", "--db", url], env=env) as proc:
        info = proc.wait_ready()
        with httpx.Client(base_url=info["url"], timeout=30) as http:
            return run(http, clients, calls, quiet)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=200, help="clients registered in the group")
    parser.add_argument("--calls", type=int, default=300, help="timed calls per operation")
    args = parser.parse_args()

    postgres = PostgresServer()
    postgres.start()
    try:
        measure(postgres, "bench_nameserver", args.clients, args.calls, quiet=False)
    finally:
        postgres.destroy()


if __name__ == "__main__":
    main()
