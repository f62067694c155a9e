"""Awaited single sends, one message per request, each send waiting for its answer before the next: graymq's
``BlockingProducer`` (plain sockets, no event loop), graymq's async ``Producer`` (awaited ``send``) and
redis-py's blocking client with hiredis (XADD to a stream, AOF ``everysec`` as graymq's async flush), each
against a server of its own started for the case, 1 KiB bodies. Then the same blocking clients shared by
``THREADS`` threads, each thread sending awaited: one ``BlockingProducer`` (each thread borrows a connection of its
own) beside one ``redis.Redis`` (its pool does the same).

Per case: msg/s, p50 / p99 of one send (µs), CPU µs per message of the server and of this process, the
1-minute load average when the case ended, and the run's loopback echo round trip (the floor under any
awaited send on this machine).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import statistics
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from graymq.bench import bench_redis
from graymq.bench.common import Figures, Server, payload
from graymq.bench.graymq_servers import Broker, NameServer

QUEUES = 8
WARM_UP = 200
THREADS = 8  # the threaded cases: one client shared by this many threads, each sending awaited
CASES = ("graymq BlockingProducer", "graymq Producer (async)", "redis-py blocking + hiredis",
         f"graymq BlockingProducer, {THREADS} threads", f"redis-py blocking + hiredis, {THREADS} threads")
_case_ids = itertools.count()


def _figures(latencies_ns: list[int], seconds: float) -> Figures:
    cuts = statistics.quantiles(latencies_ns, n=100)
    return {"msgs_s": len(latencies_ns) / seconds, "p50_us": cuts[49] / 1000, "p99_us": cuts[98] / 1000}


def timed_sends(count: int, send: Callable[[int], Any], threads: int = 1) -> Figures:
    """``send(seq)`` ``count`` times, one after the other in each of ``threads`` threads: rate and per-send
    latency."""
    latencies: list[int] = []

    def sender(first: int, last: int) -> None:
        mine = []
        for seq in range(first, last):
            start = time.perf_counter_ns()
            send(seq)
            mine.append(time.perf_counter_ns() - start)
        latencies.extend(mine)

    share = count // threads
    workers = [threading.Thread(target=sender, args=(n * share, (n + 1) * share)) for n in range(threads)]
    began = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return _figures(latencies, time.perf_counter() - began)


async def timed_awaits(count: int, send: Callable[[int], Awaitable[Any]]) -> Figures:
    """``await send(seq)`` ``count`` times, one after the other: rate and per-send latency."""
    latencies = []
    began = time.perf_counter()
    for seq in range(count):
        start = time.perf_counter_ns()
        await send(seq)
        latencies.append(time.perf_counter_ns() - start)
    return _figures(latencies, time.perf_counter() - began)


def with_cpu(server: Server, count: int, measure: Callable[[], Figures]) -> Figures:
    """``measure()``'s figures with the CPU µs per message of ``server`` and of this process, and the load."""
    server_cpu, client_cpu = server.cpu_seconds(), time.process_time()
    figures = measure()
    figures["server_cpu_us"] = (server.cpu_seconds() - server_cpu) / count * 1e6
    figures["client_cpu_us"] = (time.process_time() - client_cpu) / count * 1e6
    figures["load_1m"] = os.getloadavg()[0]
    return figures


def _blocking(ns_url: str, topic: str, group: str, count: int, threads: int) -> Figures:
    from graymq.client import BlockingProducer, Message

    with BlockingProducer(group, ns_url) as producer:
        for seq in range(WARM_UP):  # route, connection
            producer.send(Message(topic, payload(seq)))
        return timed_sends(count, lambda seq: producer.send(Message(topic, payload(seq))), threads)


async def _async(ns_url: str, topic: str, group: str, count: int) -> Figures:
    from graymq.client import Message, Producer

    producer = Producer(group, ns_url)
    await producer.start()
    try:
        for seq in range(WARM_UP):
            await producer.send(Message(topic, payload(seq)))
        return await timed_awaits(count, lambda seq: producer.send(Message(topic, payload(seq))))
    finally:
        await producer.stop()


def graymq_case(ns: NameServer, root: Path, log_dir: Path, count: int, *, blocking: bool, threads: int = 1
                ) -> Figures:
    case = next(_case_ids)
    name, topic, group = f"awaited{case}", f"BenchAwaited{case}", f"bench_awaited_{case}"
    broker = Broker(name, root / name, log_dir, nameserver=ns.url).wait_ready()
    try:
        ns.create_topic(topic, QUEUES, 0, {name})
        if blocking:
            return with_cpu(broker, count, lambda: _blocking(ns.url, topic, group, count, threads))
        return with_cpu(broker, count, lambda: asyncio.run(_async(ns.url, topic, group, count)))
    finally:
        broker.stop()


def redis_case(root: Path, log_dir: Path, count: int, threads: int = 1) -> Figures:
    import redis

    from graymq.bench.bench_peers import hiredis_in_use

    with bench_redis.RedisServer(root / f"redis-awaited{next(_case_ids)}", log_dir) as server:
        server.wait_ready()
        r = redis.Redis(host="127.0.0.1", port=server.port or 0)  # its pool lends each thread a connection
        try:
            for seq in range(WARM_UP):
                r.xadd(bench_redis.STREAM, {b"d": payload(seq)})
            figures = with_cpu(server, count, lambda: timed_sends(
                count, lambda seq: r.xadd(bench_redis.STREAM, {b"d": payload(seq)}), threads))
        finally:
            r.close()
        figures["hiredis"] = hiredis_in_use()
        return figures


def cases(ns: NameServer, root: Path, log_dir: Path, count: int, with_redis: bool
          ) -> list[tuple[str, Callable[[Path], Figures]]]:
    """``(name, fn(tmp))`` of each case, in ``CASES`` order (Redis left out unless ``with_redis``)."""
    return [
        (CASES[0], lambda tmp: graymq_case(ns, tmp, log_dir, count, blocking=True)),
        (CASES[1], lambda tmp: graymq_case(ns, tmp, log_dir, count, blocking=False)),
        *([(CASES[2], lambda tmp: redis_case(tmp, log_dir, count))] if with_redis else []),
        (CASES[3], lambda tmp: graymq_case(ns, tmp, log_dir, count, blocking=True, threads=THREADS)),
        *([(CASES[4], lambda tmp: redis_case(tmp, log_dir, count, THREADS))] if with_redis else []),
    ]


def render(medians: dict[str, Figures], table: Callable[[list[str], list[list[str]]], str],
           fmt: Callable[..., str], echo_rtt_us: float | None) -> list[str]:
    """The part's table (one row per case), each graymq row's rate against Redis's with as many threads."""
    if not medians:
        return []
    rows = []
    for case, f in medians.items():
        if "error" in f:
            rows.append([case, f"FAILED: {f['error']}", *[""] * 6])
            continue
        redis_rate = medians.get(CASES[4] if case == CASES[3] else CASES[2], {}).get("msgs_s")
        ratio = f["msgs_s"] / redis_rate if redis_rate and not case.startswith("redis") else None
        rows.append([case, fmt(f["msgs_s"], "rate"), fmt(ratio, "ratio"), fmt(f["p50_us"]), fmt(f["p99_us"]),
                     fmt(f["server_cpu_us"]), fmt(f["client_cpu_us"]), fmt(f["load_1m"])])
    headers = ["client", "msg/s", "× Redis", "p50 µs", "p99 µs", "server CPU µs/msg", "client CPU µs/msg", "load 1m"]
    rtt = f" Loopback echo round trip of the run: {fmt(echo_rtt_us)} µs." if echo_rtt_us else ""
    return ["### Awaited single sends: BlockingProducer, Producer and redis-py's blocking client", "",
            "Each send waits for its answer before the next (in each thread: one client shared by "
            f"{THREADS} threads in the threaded rows); one message per request, 1 KiB." + rtt, "",
            table(headers, rows), ""]

