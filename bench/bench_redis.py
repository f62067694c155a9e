"""The same workloads against Redis Streams: ``redis-server`` (Debian package) on a free loopback port,
AOF ``everysec`` (graymq's async flush) or ``always`` (its sync flush), redis-py's asyncio client (the
headline comparison, ``bench_peers``, uses its synchronous client with hiredis).

- produce, single: one XADD per message, 64 outstanding (a connection each, from redis-py's pool);
- produce, batch: pipelines (no MULTI) of 64 XADDs, 4 outstanding;
- consume: XREADGROUP COUNT 64 on one consumer of a group, then one XACK of the batch's ids;
- latency: the XADDs due at each tick in one pipeline, a consumer blocked in XREADGROUP BLOCK, XACK after each batch.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from graymq.bench.common import (
    BATCH,
    SINGLE_IN_FLIGHT,
    Figures,
    Server,
    binary_path,
    free_port,
    paced,
    payload,
    produce_consume_figures,
    timed_produce,
)
from graymq.bench.latency import InFlight, Recorder, measure

STREAM = "bench"
GROUP = "bench_group"


class RedisServer(Server):
    def __init__(self, data_dir: Path, log_dir: Path, appendfsync: str = "everysec") -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        port = free_port()
        args = [binary_path("redis-server"), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data_dir),
                "--appendonly", "yes", "--appendfsync", appendfsync, "--save", "", "--daemonize", "no",
                "--protected-mode", "no", "--logfile", ""]
        super().__init__(f"redis-{appendfsync}", args, log_dir, port=port)


def _client(port: int, connections: int):  # type: ignore[no-untyped-def]
    """A client whose pool makes callers wait for a free connection (never ``Too many connections``)."""
    import redis.asyncio as aioredis

    pool = aioredis.BlockingConnectionPool(host="127.0.0.1", port=port, max_connections=connections, timeout=None)
    return aioredis.Redis(connection_pool=pool, decode_responses=False)


async def produce(port: int, count: int, batched: bool) -> float:
    r = _client(port, SINGLE_IN_FLIGHT + 4)
    try:
        await r.ping()

        async def single(first: int, n: int) -> None:
            await r.xadd(STREAM, {b"d": payload(first)})

        async def batch(first: int, n: int) -> None:
            pipe = r.pipeline(transaction=False)
            for seq in range(first, first + n):
                pipe.xadd(STREAM, {b"d": payload(seq)})
            await pipe.execute()

        return await timed_produce(count, batched, single, batch)
    finally:
        await r.aclose(close_connection_pool=True)


async def consume(port: int, count: int, batch: int = BATCH) -> float:
    r = _client(port, 2)
    try:
        await r.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
        received = 0
        first_at = None
        while received < count:
            reply = await r.xreadgroup(GROUP, "c1", {STREAM: ">"}, count=batch, block=1000)
            if not reply:
                continue
            if first_at is None:
                first_at = time.perf_counter()
            entries = reply[0][1]
            received += len(entries)
            await r.xack(STREAM, GROUP, *[entry_id for entry_id, _ in entries])
        assert first_at is not None
        return time.perf_counter() - first_at
    finally:
        await r.aclose(close_connection_pool=True)


async def throughput_case(root: Path, log_dir: Path, appendfsync: str, batched: bool, count: int,
                          name: str) -> Figures:
    with RedisServer(root / name, log_dir, appendfsync) as server:
        server.wait_ready()
        port = server.port or 0
        return await produce_consume_figures(server, count, lambda: produce(port, count, batched),
                                             lambda: consume(port, count))


async def latency_consume(params: dict[str, Any], recorder: Recorder, ready: Callable[[], None]) -> None:
    r = _client(params["port"], 2)
    try:
        await r.xgroup_create(STREAM, GROUP, id="$", mkstream=True)
        ready()
        while not recorder.done.is_set():
            reply = await r.xreadgroup(GROUP, "c1", {STREAM: ">"}, count=BATCH, block=200)
            if not reply:
                continue
            now = time.monotonic_ns()
            entries = reply[0][1]
            for _, fields in entries:
                recorder.record(fields[b"d"], now)
            await r.xack(STREAM, GROUP, *[entry_id for entry_id, _ in entries])
    finally:
        await r.aclose(close_connection_pool=True)


async def latency_produce(params: dict[str, Any], rate: float, count: int) -> int:
    r = _client(params["port"], SINGLE_IN_FLIGHT)
    in_flight = InFlight()
    try:
        await r.ping()

        def send(first: int, n: int) -> None:
            pipe = r.pipeline(transaction=False)
            for seq in range(first, first + n):
                pipe.xadd(STREAM, {b"d": payload(seq)})
            in_flight.track(asyncio.get_running_loop().create_task(pipe.execute()), n)

        await paced(rate, count, send)
        return await in_flight.acked_when_done()
    finally:
        await r.aclose(close_connection_pool=True)


def latency_case(root: Path, log_dir: Path, rate: float, duration_s: float) -> Figures:
    with RedisServer(root / "redis-latency", log_dir) as server:
        server.wait_ready()
        figures = measure(__name__, {"port": server.port}, rate, duration_s,
                          server.pid)
        figures["broker_peak_rss_mib"] = server.peak_rss_mib()
        return figures
