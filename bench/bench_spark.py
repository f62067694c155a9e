"""Messages per second into Spark through the ``graymq`` source, and rows per second out through its sink.

    .venv/bin/python -m graymq.bench.bench_spark [--count N] [--size BYTES] [--queues Q] [--master local[2]]
                                          [--pull-batch 1024] [--rounds 3]

Starts a local cluster (``graymq up``: name server on SQLite + one broker) in a temporary
directory, fills the normal queues of a topic with N messages (batched sends, not measured),
then reads them into Spark ``--rounds`` times with ``spark.read.format("graymq")`` and the
``noop`` sink (every column materialized, nothing collected). The first round includes Spark's
start-up of its Python workers; the figure to quote is the best of the later rounds. Then it writes
N rows of the same size from Spark (``spark.range``, two partitions) to another topic ``--rounds``
times with ``df.write.format("graymq")`` (one producer per task, ``batchMaxMessages`` rows per request,
a new write id each round) and reports rows/s the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from graymq.client import Message, Producer
from graymq.client.nameserver_client import NameServerClient

TOPIC = "BenchSpark"
SINK_TOPIC = "BenchSparkSink"
GROUP = "BENCH_SPARK"
READY = "graymq-ready "
SEND_BATCH = 64
SINK_BATCH = 256  # the sink's default batchMaxMessages
MIB = 1024 * 1024


def start_cluster(data: Path) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "GRAYMQ_LOG_LEVEL": "WARNING", "GRAYMQ_BROKER_REGISTER_INTERVAL_S": "0.5"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "graymq.gray_controller.cli", "up", "--data", str(data), "--nameserver-port", "0",
         "--broker-port", "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(READY):
            return proc, str(json.loads(line[len(READY):])["url"])
    raise SystemExit(f"graymq up exited with {proc.wait()} before it was ready")


async def create_topics(url: str, queues: int) -> None:
    admin = NameServerClient(url, admin_token="dev-token")
    try:
        for topic in (TOPIC, SINK_TOPIC):
            await admin.put_topic(topic, queues, 2)
            deadline = time.monotonic() + 30
            while not (await admin.request("GET", f"/v1/topics/{topic}/route"))["brokers"]:
                if time.monotonic() > deadline:
                    raise SystemExit(f"topic {topic} has no broker after 30 s")
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


def measure(rounds: int, count: int, size: int, run: Callable[[], None]) -> float:
    """The best rows/s of the rounds after the first (which starts Spark's Python workers)."""
    rates = []
    for n in range(1, rounds + 1):
        began = time.perf_counter()
        run()
        seconds = time.perf_counter() - began
        rates.append(count / seconds)
        print(f"round {n}: {count:,} rows in {seconds:6.2f} s  {count / seconds:>10,.0f} rows/s  "
              f"{count * size / seconds / MIB:7.1f} MiB/s{'  (cold: Python worker start-up)' if n == 1 else ''}")
    return max(rates[1:] or rates)


def write_rounds(spark: Any, url: str, master: str, rounds: int, count: int, size: int, batch: int) -> None:
    frame = spark.range(0, count, numPartitions=2).selectExpr(f"cast(repeat('x', {size}) as binary) as body")
    options = {"nameserver": url, "topic": SINK_TOPIC, "batchMaxMessages": str(batch)}
    best = measure(rounds, count, size, lambda: frame.write.format("graymq").options(**options).mode("append").save())
    print(f"Spark → graymq batch write ({master}, {size} B bodies, {batch} rows per request): "
          f"{best:,.0f} rows/s ({best * size / MIB:.1f} MiB/s)")


def read_rounds(url: str, master: str, pull_batch: int, rounds: int, count: int, size: int) -> None:
    from graymq.client.spark import register
    from graymq.client.spark.session import local_session

    spark = local_session("bench-spark", master=master, log_level="ERROR")
    register(spark)
    try:
        options = {"nameserver": url, "topic": TOPIC, "group": GROUP, "startingOffsets": "earliest",
                   "pullBatchSize": str(pull_batch)}
        frame = spark.read.format("graymq").options(**options).load()
        best = measure(rounds, count, size, lambda: frame.write.format("noop").mode("overwrite").save())
        print(f"graymq → Spark batch read ({master}, {size} B bodies, pull batch {pull_batch}): "
              f"{best:,.0f} msgs/s ({best * size / MIB:.1f} MiB/s)")
        write_rounds(spark, url, master, rounds, count, size, SINK_BATCH)
    finally:
        spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024, help="body bytes")
    parser.add_argument("--queues", type=int, default=8, help="queues of the topic (2 gray; the rest are read)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--pull-batch", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as data:
        cluster, url = start_cluster(Path(data))
        try:
            began = time.perf_counter()
            asyncio.run(fill(url, args.count, args.size, args.queues))
            print(f"filled {args.count:,} messages of {args.size} B in {time.perf_counter() - began:.1f} s")
            read_rounds(url, args.master, args.pull_batch, args.rounds, args.count, args.size)
        finally:
            cluster.terminate()
            cluster.wait(30)


if __name__ == "__main__":
    main()
