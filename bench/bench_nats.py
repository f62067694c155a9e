"""The same workloads against NATS JetStream: ``nats-server -js`` (Debian package) on a free loopback
port, a stream with file storage, nats-py.

- produce, single: ``js.publish`` (waits for the stream's ack), 64 outstanding;
- produce, batch: JetStream has no batch publish, so 64 ``publish_async`` then wait for their 64
  acks, 4 such groups outstanding;
- consume: a durable pull consumer, ``fetch(64)``, ``ack()`` each message;
- latency: ``publish_async`` of each message as it is due; a consumer fetching and acking.

nats-server 2.9 has no "fsync every write" setting (file storage writes through the page
cache and syncs periodically), so NATS has no sync-flush row.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from graymq.bench.common import (
    BATCH,
    BATCH_IN_FLIGHT,
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

STREAM = "BENCH"
SUBJECT = "bench.data"
DURABLE = "bench_consumer"


class NatsServer(Server):
    def __init__(self, data_dir: Path, log_dir: Path) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        port = free_port()
        args = [binary_path("nats-server"), "-js", "-sd", str(data_dir), "-a", "127.0.0.1", "-p", str(port)]
        super().__init__("nats", args, log_dir, port=port)


async def _connect(port: int) -> Any:
    import nats

    return await nats.connect(f"nats://127.0.0.1:{port}", max_reconnect_attempts=0,
                              pending_size=64 * 1024 * 1024)


async def create_stream(port: int) -> None:
    from nats.js.api import StorageType, StreamConfig

    nc = await _connect(port)
    try:
        await nc.jetstream().add_stream(StreamConfig(name=STREAM, subjects=[SUBJECT], storage=StorageType.FILE))
    finally:
        await nc.close()


async def produce(port: int, count: int, batched: bool) -> float:
    nc = await _connect(port)
    js = nc.jetstream(publish_async_max_pending=BATCH * BATCH_IN_FLIGHT * 2)
    try:
        async def single(first: int, n: int) -> None:
            await js.publish(SUBJECT, payload(first))

        async def batch(first: int, n: int) -> None:
            acks = [await js.publish_async(SUBJECT, payload(seq)) for seq in range(first, first + n)]
            await asyncio.gather(*acks)

        return await timed_produce(count, batched, single, batch)
    finally:
        await nc.close()


async def consume(port: int, count: int, batch: int = BATCH) -> float:
    import nats.errors

    nc = await _connect(port)
    try:
        sub = await nc.jetstream().pull_subscribe(SUBJECT, durable=DURABLE, stream=STREAM)
        received = 0
        first_at = None
        while received < count:
            try:
                msgs = await sub.fetch(batch, timeout=1)
            except nats.errors.TimeoutError:
                continue
            if first_at is None:
                first_at = time.perf_counter()
            for msg in msgs:
                await msg.ack()
            received += len(msgs)
        assert first_at is not None
        return time.perf_counter() - first_at
    finally:
        await nc.close()


async def throughput_case(root: Path, log_dir: Path, batched: bool, count: int, name: str) -> Figures:
    with NatsServer(root / name, log_dir) as server:
        server.wait_ready()
        port = server.port or 0
        await create_stream(port)
        return await produce_consume_figures(server, count, lambda: produce(port, count, batched),
                                             lambda: consume(port, count))


async def latency_consume(params: dict[str, Any], recorder: Recorder, ready: Callable[[], None]) -> None:
    import nats.errors

    nc = await _connect(params["port"])
    try:
        sub = await nc.jetstream().pull_subscribe(SUBJECT, durable=DURABLE, stream=STREAM)
        ready()
        while not recorder.done.is_set():
            try:
                msgs = await sub.fetch(BATCH, timeout=0.5)
            except nats.errors.TimeoutError:
                continue
            now = time.monotonic_ns()
            for msg in msgs:
                recorder.record(msg.data, now)
                await msg.ack()
    finally:
        await nc.close()


async def latency_produce(params: dict[str, Any], rate: float, count: int) -> int:
    nc = await _connect(params["port"])
    js = nc.jetstream(publish_async_max_pending=100_000)
    in_flight = InFlight()
    try:
        queue: asyncio.Queue[tuple[int, int]] = asyncio.Queue()

        async def publisher() -> None:
            while True:
                first, n = await queue.get()
                for seq in range(first, first + n):
                    in_flight.track(await js.publish_async(SUBJECT, payload(seq)))
                queue.task_done()

        task = asyncio.create_task(publisher())
        await paced(rate, count, lambda first, n: queue.put_nowait((first, n)))
        await queue.join()
        task.cancel()
        return await in_flight.acked_when_done()
    finally:
        await nc.close()


def latency_case(root: Path, log_dir: Path, rate: float, duration_s: float) -> Figures:
    with NatsServer(root / "nats-latency", log_dir) as server:
        server.wait_ready()
        asyncio.run(create_stream(server.port or 0))
        figures = measure(__name__, {"port": server.port}, rate, duration_s,
                          server.pid)
        figures["broker_peak_rss_mib"] = server.peak_rss_mib()
        return figures
