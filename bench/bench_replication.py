"""The cost of replication on produce: one broker (a single copy) against a broker set of two replicas under sync
and under async replication, the same client library and topic for each, on one name server (SQLite).

Per setup: batched produce (batches of ``BATCH``, one outstanding) in msg/s, and awaited single sends (each send
awaited before the next) in msg/s with their p50/p99 latency. Sync replication answers a send once the follower
stored it: one more loopback round trip (the follower's next fetch) on every awaited send.

    python -m graymq.bench.bench_replication [--count N] [--single N]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from graymq.bench.common import BATCH, Figures, Server, graymq_command, payload, percentile
from graymq.bench.graymq_servers import ENV, READY, NameServer, create_topic
from graymq.client import Message, Producer

SETUPS = (("single copy", None), ("2 replicas, sync", "sync"), ("2 replicas, async", "async"))


def start_replica(name: str, replica: int, mode: str | None, root: Path, ns_url: str) -> Server:
    args = ["broker", "--name", name, "--port", "0", "--store", str(root / f"{name}-{replica}"),
            "--segment-size", str(256 << 20), "--nameserver", ns_url]
    if mode is not None:
        args += ["--replica-id", str(replica), "--replication", mode]
    return Server(f"broker-{name}-{replica}", graymq_command(*args), root, env=ENV, ready_prefix=READY)


def in_sync(ns_url: str, name: str, replicas: int) -> bool:
    for broker in httpx.get(f"{ns_url}/v1/brokers", timeout=5).json():
        if broker["broker_name"] == name:
            replica_set = broker.get("replica_set")
            return replicas == 1 or (replica_set is not None and len(replica_set["in_sync"]) == replicas)
    return False


async def measure(ns_url: str, topic: str, count: int, single: int) -> Figures:
    producer = Producer(f"{topic}_producers", ns_url)
    await producer.start()
    try:
        await producer.send(Message(topic, payload(0)))  # route and connection
        began = time.perf_counter()
        for first in range(0, count, BATCH):
            await producer.send_batch([Message(topic, payload(s)) for s in range(first, min(count, first + BATCH))])
        batched_s = time.perf_counter() - began
        latencies = []
        began = time.perf_counter()
        for seq in range(single):
            sent = time.perf_counter()
            await producer.send(Message(topic, payload(seq)))
            latencies.append((time.perf_counter() - sent) * 1000)
        single_s = time.perf_counter() - began
    finally:
        await producer.stop()
    latencies.sort()
    return {"batched_msgs_s": count / batched_s, "awaited_msgs_s": single / single_s,
            "awaited_p50_ms": percentile(latencies, 0.50), "awaited_p99_ms": percentile(latencies, 0.99)}


async def setup_case(ns: NameServer, root: Path, case: int, mode: str | None, count: int, single: int) -> Figures:
    name, topic = f"rep{case}", f"BenchReplication{case}"
    replicas = 1 if mode is None else 2
    servers = []
    try:
        for replica in range(replicas):
            servers.append(start_replica(name, replica, mode, root, ns.url).wait_ready())
        deadline = time.monotonic() + 60
        while not in_sync(ns.url, name, replicas):
            if time.monotonic() > deadline:
                raise TimeoutError(f"broker set {name} not in sync after 60 s")
            await asyncio.sleep(0.1)
        admin = ns.admin()
        try:
            await create_topic(admin, topic, 8, 0, {name})
        finally:
            await admin.close()
        return await measure(ns.url, topic, count, single)
    finally:
        for server in servers:
            server.stop()


def run(root: Path, count: int, single: int, repeat: int = 1) -> dict[str, list[Figures]]:
    """Every setup ``repeat`` times, interleaved."""
    results: dict[str, list[Figures]] = {label: [] for label, _ in SETUPS}
    with NameServer(root / "ns", root).wait_ready() as ns:
        case = 0
        for _ in range(repeat):
            for label, mode in SETUPS:
                case += 1
                results[label].append(asyncio.run(setup_case(ns, root, case, mode, count, single)))
    return results


def render(results: dict[str, list[Figures]]) -> str:
    def median(label: str, key: str) -> float:
        values = sorted(f[key] for f in results[label])
        return values[len(values) // 2]

    base = results["single copy"]
    lines = ["| setup | batched produce (msg/s) | awaited sends (msg/s) | p50 / p99 (ms) | batched vs single copy |",
             "|---|---|---|---|---|"]
    for label in results:
        ratio = median(label, "batched_msgs_s") / median("single copy", "batched_msgs_s") if base else float("nan")
        lines.append(f"| {label} | {median(label, 'batched_msgs_s'):,.0f} | {median(label, 'awaited_msgs_s'):,.0f} | "
                     f"{median(label, 'awaited_p50_ms'):.2f} / {median(label, 'awaited_p99_ms'):.2f} | {ratio:.2f}× |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m graymq.bench.bench_replication", description=__doc__)
    parser.add_argument("--count", type=int, default=30_000, help="messages of the batched phase (default 30000)")
    parser.add_argument("--single", type=int, default=3_000, help="awaited single sends (default 3000)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each setup; medians shown (default 1)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="graymq-bench-replication-") as tmp:
        results: Any = run(Path(tmp), args.count, args.single, args.repeat)
    print(render(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
