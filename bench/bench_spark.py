"""Messages per second into Spark through the ``graymq`` source, and rows per second out through its sink.

    python -m graymq.bench spark                          (a part of ``make bench``: 20,000 rows, 3 rounds)
    .venv/bin/python -m graymq.bench.bench_spark [--count N] [--size BYTES] [--queues Q] [--master local[2]]
                                          [--pull-batch 1024] [--rounds 3]

Starts a local cluster (``graymq up``: name server on SQLite + one broker, no gRPC endpoint) in a temporary
directory, fills the normal queues of a topic with N messages (batched sends, not measured),
then reads them into Spark ``--rounds`` times with ``spark.read.format("graymq")`` and the
``noop`` sink (every column materialized, nothing collected). Then it writes N rows of the same size from
Spark (``spark.range``, two partitions) to another topic ``--rounds`` times with ``df.write.format("graymq")``
(one producer per task, ``batchMaxMessages`` rows per request, a new write id each round). The first round of
each includes Spark's start-up of its Python workers and is not counted: run alone, the script prints the best
of the later rounds; in ``python -m graymq.bench`` they are its samples, and RESULTS.md shows their median.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from graymq.bench.common import Figures
from graymq.client import Message, Producer
from graymq.nameserver_api.client import NameServerClient

TOPIC = "BenchSpark"
SINK_TOPIC = "BenchSparkSink"
GROUP = "BENCH_SPARK"
READY = "graymq-ready "
SEND_BATCH = 64
SINK_BATCH = 256  # the sink's default batchMaxMessages
MIB = 1024 * 1024
READ_CASE = "graymq → Spark (source, batch read)"
WRITE_CASE = "Spark → graymq (sink, batch write)"


@dataclass(frozen=True)
class Settings:
    """What one run reads and writes."""

    count: int = 200_000
    size: int = 1024
    queues: int = 8
    master: str = "local[2]"
    pull_batch: int = 1024
    rounds: int = 3


def start_cluster(data: Path) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "GRAYMQ_LOG_LEVEL": "WARNING", "GRAYMQ_BROKER_REGISTER_INTERVAL_S": "0.5"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "graymq.gray_controller.cli", "up", "--data", str(data), "--nameserver-port", "0",
         "--broker-port", "0", "--grpc-port", "off"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(READY):
            return proc, str(json.loads(line[len(READY):])["url"])
    raise RuntimeError(f"graymq up exited with {proc.wait()} before it was ready")


async def create_topics(url: str, queues: int) -> None:
    admin = NameServerClient(url, admin_token="dev-token")
    try:
        for topic in (TOPIC, SINK_TOPIC):
            await admin.put_topic(topic, queues, 2)
            deadline = time.monotonic() + 30
            while not (await admin.request("GET", f"/v1/topics/{topic}/route"))["brokers"]:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"topic {topic} has no broker after 30 s")
                await asyncio.sleep(0.2)
        await asyncio.sleep(1.0)  # one broker heartbeat: the broker has applied the topics
    finally:
        await admin.close()


async def fill(url: str, count: int, size: int, queues: int) -> None:
    await create_topics(url, queues)
    producer = Producer("BENCH_SPARK_PRODUCERS", url)
    await producer.start()
    try:
        body = bytes(range(256)) * (size // 256) + bytes(size % 256)
        for start in range(0, count, SEND_BATCH):
            end = min(count, start + SEND_BATCH)
            await producer.send_batch([Message(TOPIC, body, tags="bench", keys=[f"k{n}"]) for n in range(start, end)])
    finally:
        await producer.stop()


def measure(rounds: int, count: int, size: int, run: Callable[[], None], what: str) -> list[Figures]:
    """Figures of each round after the first (which starts Spark's Python workers); every round printed."""
    warm = []
    for n in range(1, rounds + 1):
        began = time.perf_counter()
        run()
        seconds = time.perf_counter() - began
        rate = count / seconds
        print(f"{what} round {n}: {count:,} rows in {seconds:6.2f} s  {rate:>10,.0f} rows/s  "
              f"{rate * size / MIB:7.1f} MiB/s{'  (cold: Python worker start-up)' if n == 1 else ''}", flush=True)
        if n > 1 or rounds == 1:
            warm.append({"rows_s": rate, "mib_s": rate * size / MIB, "seconds": seconds})
    return warm


def spark_rounds(url: str, settings: Settings) -> dict[str, list[Figures]]:
    """Figures of the warm rounds of the source's read and the sink's write, by case."""
    from graymq.client.spark import register
    from graymq.client.spark.session import local_session

    spark = local_session("bench-spark", master=settings.master, log_level="ERROR")
    register(spark)
    try:
        options = {"nameserver": url, "topic": TOPIC, "group": GROUP, "startingOffsets": "earliest",
                   "pullBatchSize": str(settings.pull_batch)}
        read = spark.read.format("graymq").options(**options).load()
        written = spark.range(0, settings.count, numPartitions=2).selectExpr(
            f"cast(repeat('x', {settings.size}) as binary) as body")
        sink = {"nameserver": url, "topic": SINK_TOPIC, "batchMaxMessages": str(SINK_BATCH)}
        return {
            READ_CASE: measure(settings.rounds, settings.count, settings.size,
                               lambda: read.write.format("noop").mode("overwrite").save(), "read"),
            WRITE_CASE: measure(settings.rounds, settings.count, settings.size,
                                lambda: written.write.format("graymq").options(**sink).mode("append").save(), "write"),
        }
    finally:
        spark.stop()


def missing() -> str | None:
    """Why the Spark part cannot run here (no pyspark, no Java), else ``None``."""
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed (pip install 'graymq[spark]')"
    java_home = os.environ.get("JAVA_HOME")
    if not (java_home and Path(java_home, "bin", "java").exists()) and shutil.which("java") is None:
        return "no Java runtime (java on PATH or JAVA_HOME), which Spark needs"
    return None


def run(root: Path, settings: Settings) -> dict[str, list[Figures]]:
    """A local cluster under ``root``, the source topic filled, then the read and write rounds."""
    with tempfile.TemporaryDirectory(prefix="bench-spark-", dir=root) as data:
        cluster, url = start_cluster(Path(data))
        try:
            began = time.perf_counter()
            asyncio.run(fill(url, settings.count, settings.size, settings.queues))
            print(f"filled {settings.count:,} messages of {settings.size} B in {time.perf_counter() - began:.1f} s",
                  flush=True)
            return spark_rounds(url, settings)
        finally:
            cluster.terminate()
            cluster.wait(30)


def render(medians: dict[str, Figures], settings: Settings, table: Callable[[list[str], list[list[str]]], str],
           fmt: Callable[..., str], skipped: str | None) -> list[str]:
    """The part's table: the source's read and the sink's write side by side."""
    title = "### Spark: the graymq source and sink"
    if skipped:
        return [title, "", f"Not run: {skipped}.", ""]
    if not medians:
        return []
    rows = [[case, f"FAILED: {f['error']}", ""] if "error" in f else [case, fmt(f["rows_s"], "rate"), fmt(f["mib_s"])]
            for case, f in medians.items()]
    return [title, "", f"Spark {settings.master}, {settings.count:,} rows of {settings.size} B, both directions in one "
            f"session; the source reads with pulls of {settings.pull_batch} into the `noop` sink, the sink writes "
            f"`spark.range` rows from two partitions, one producer per task, {SINK_BATCH} rows per request. Median "
            "of the rounds after the first (which starts Spark's Python workers).", "",
            table(["direction", "rows/s", "MiB/s"], rows), ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024, help="body bytes")
    parser.add_argument("--queues", type=int, default=8, help="queues of the topic (2 gray; the rest are read)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--pull-batch", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    reason = missing()
    if reason:
        raise SystemExit(f"bench_spark: {reason}")
    settings = Settings(args.count, args.size, args.queues, args.master, args.pull_batch, args.rounds)
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as root:
        for case, figures in run(Path(root), settings).items():
            best = max(f["rows_s"] for f in figures)
            print(f"{case}: best {best:,.0f} rows/s ({best * settings.size / MIB:.1f} MiB/s)")


if __name__ == "__main__":
    main()
