"""Where the broker's CPU goes on the two send paths the targets measure: a cProfile of a real ``graymq broker``
process (``GRAYMQ_BROKER_PROFILE``: SIGUSR1 starts it, SIGUSR2 writes it) over exactly the measured window.

    .venv/bin/python -m graymq.bench profile          (or: python -m graymq.bench.bench_profile)

Cases, each on a fresh broker and store (async flush, dev mode), 1 KiB bodies, idempotent requests (producer id
and sequence, as the producers send them):
- ``batch``: SEND_BATCH of ``BATCH`` messages, one batch outstanding;
- ``awaited``: SEND_MESSAGE, each awaited before the next.
Per case: the broker's CPU µs per message (``batch``) or per request (``awaited``) measured WITHOUT the profiler
(its overhead inflates Python calls), then the top functions by own CPU from the profiled window, per unit too.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pstats
import signal
import socket
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from graymq.bench.common import cpu_seconds, payload, quiet_logs
from graymq.bench.graymq_servers import Broker, create_topic_on_broker
from graymq.broker_ext.profiling import ENV
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.broker_client import BrokerClient

TOPIC = "BenchProfile"
GROUP = "bench_profile"
QUEUES = 4
BATCH = 100
TOP = 15
HOST = socket.gethostname()
PRODUCER_ID = 0x5EED


class _Sender:
    """Idempotent requests as a producer numbers them: one sequence per queue, ascending."""

    def __init__(self, client: BrokerClient, address: str) -> None:
        self.client, self.address = client, address
        self.sequences = [0] * QUEUES
        self.sent = 0

    def _next(self) -> tuple[int, int]:
        queue_id = self.sent % QUEUES
        self.sequences[queue_id] += 1
        self.sent += 1
        return queue_id, self.sequences[queue_id]

    def _message(self, seq: int) -> pb.Message:
        return pb.Message(topic=TOPIC, body=payload(seq), tags="bench", born_timestamp=int(time.time() * 1000),
                          born_host=HOST, msg_id=f"{PRODUCER_ID:016X}{self.sent:08X}{seq:08X}")

    async def batch(self) -> None:
        queue_id, sequence = self._next()
        await self.client.send_batch(self.address, pb.SendBatchRequest(
            producer_group=GROUP, topic=TOPIC, queue_id=queue_id, producer_id=PRODUCER_ID, sequence=sequence,
            messages=[self._message(i) for i in range(BATCH)]))

    async def single(self) -> None:
        queue_id, sequence = self._next()
        await self.client.send(self.address, pb.SendRequest(
            producer_group=GROUP, queue_id=queue_id, producer_id=PRODUCER_ID, sequence=sequence,
            message=self._message(0)))


async def _windows(broker: Broker, call: Callable[[], Awaitable[None]], requests: int) -> float:
    """Warm up, then ``requests`` calls unprofiled (the broker's CPU seconds returned), then ``requests`` more
    inside the profile window."""
    for _ in range(max(requests // 10, 20)):
        await call()
    before = cpu_seconds(broker.pid)
    for _ in range(requests):
        await call()
    cpu = cpu_seconds(broker.pid) - before
    os.kill(broker.pid, signal.SIGUSR1)
    await asyncio.sleep(0.2)  # the signal handler runs on the broker's loop
    for _ in range(requests):
        await call()
    os.kill(broker.pid, signal.SIGUSR2)
    return cpu


def profile_case(case: str, requests: int, root: Path) -> dict[str, Any]:
    """One case on a fresh broker: CPU µs per unit unprofiled, and the profile's top functions per unit."""
    units = requests * (BATCH if case == "batch" else 1)
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        stats_path = Path(tmp) / "broker.prof"
        os.environ[ENV] = str(stats_path)
        try:
            broker = Broker(f"profile-{case}", Path(tmp) / "store", Path(tmp)).wait_ready()
        finally:
            del os.environ[ENV]
        with broker:
            async def drive() -> float:
                client = BrokerClient()
                try:
                    await create_topic_on_broker(broker.address, TOPIC, QUEUES)
                    sender = _Sender(client, broker.address)
                    return await _windows(broker, sender.batch if case == "batch" else sender.single, requests)
                finally:
                    await client.close()

            cpu = asyncio.run(drive())
            deadline = time.monotonic() + 30
            while not stats_path.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.3)  # dump_stats writes the file in one go, but give it a moment to close
            stats = pstats.Stats(str(stats_path))
    return {"case": case, "unit": "message" if case == "batch" else "request", "units": units,
            "cpu_us_per_unit": cpu / units * 1e6, "top": _top(stats, units)}


def _top(stats: pstats.Stats, units: int) -> list[tuple[str, float, float]]:
    """(function, own µs per unit, cumulative µs per unit) of the ``TOP`` functions by own time."""
    rows = []
    for (path, line, name), (_, _, own, cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]
        where = f"{Path(path).name}:{line}" if line else path
        rows.append((f"{name} ({where})", own / units * 1e6, cumulative / units * 1e6))
    rows.sort(key=lambda row: row[1], reverse=True)
    return rows[:TOP]


def render(result: dict[str, Any]) -> str:
    unit = result["unit"]
    lines = [f"broker profile, {result['case']}: {result['cpu_us_per_unit']:.1f} CPU µs per {unit} unprofiled "
             f"({result['units']} {unit}s); top functions by own time (profiled, µs per {unit}):",
             f"  {'own':>8} {'cumul':>8}  function"]
    lines += [f"  {own:8.2f} {cumulative:8.2f}  {name}" for name, own, cumulative in result["top"]]
    return "\n".join(lines)


def render_section(cases: dict[str, dict[str, Any]], table: Callable[[list[str], list[list[str]]], str]) -> list[str]:
    """RESULTS.md's section: per case (``profile_case``'s figures) the broker's top functions, nothing if none ran."""
    if not cases:
        return []
    out = ["## The broker's profile (cProfile of the broker process, CPU of its event loop thread)", "",
           "Own time excludes the functions called (compiled Cython functions are not seen: their time is their "
           "caller's); the profiler inflates Python calls, so read shares, and the unprofiled CPU for the cost.", ""]
    for figures in cases.values():
        if "top" not in figures:  # a failed run
            continue
        unit = figures["unit"]
        out += [f"**{figures['case']}**: {figures['cpu_us_per_unit']:.1f} broker CPU µs per {unit} unprofiled", "",
                table([f"own µs/{unit}", f"cumulative µs/{unit}", "function"],
                      [[f"{own:.2f}", f"{cumulative:.2f}", name.replace("|", "/")]
                       for name, own, cumulative in figures["top"]]), ""]
    return out


def run(root: Path, batches: int = 300, sends: int = 3000) -> list[dict[str, Any]]:
    """Both cases, each printed as it ends."""
    results = []
    for case, requests in (("batch", batches), ("awaited", sends)):
        result = profile_case(case, requests, root)
        print(render(result), flush=True)
        results.append(result)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=300, help="batches of 100 per window (default 300)")
    parser.add_argument("--sends", type=int, default=3000, help="awaited sends per window (default 3000)")
    args = parser.parse_args()
    with quiet_logs(), tempfile.TemporaryDirectory(prefix="graymq-profile-") as tmp:
        run(Path(tmp), args.batches, args.sends)


if __name__ == "__main__":
    main()
