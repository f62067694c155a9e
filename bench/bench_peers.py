"""The headline comparison (issue 21): the same four phases for graymq and each peer's fastest Python client.

Systems: graymq with its default ``Producer`` and ``PushConsumer`` (and the same code, broker and clients, on
uvloop); Redis 7 Streams with redis-py's synchronous client and hiredis (and redis-py's asyncio client, for
reference); NATS JetStream with nats-py. Flush: graymq async (and sync, for the group-commit target), Redis AOF
``everysec``, JetStream's default.

- ``batched``: ``PEER_COUNT`` 1 KiB messages in batches of ``PEER_BATCH`` (a pipeline of XADDs, a SEND_BATCH,
  ``PEER_BATCH`` ``publish_async`` then their acks), one batch outstanding;
- ``consume``: the same messages read back in batches of ``PEER_BATCH`` and acknowledged;
- ``awaited``: ``AWAITED_COUNT`` sends, each awaited before the next (one message per request);
- ``e2e`` (``e2e_case``): a producer process sending at ``E2E_RATE`` msg/s with each send awaited and a consumer
  process, through ``latency.measure``: the rate reached and p50 / p99 from send to receipt.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from graymq.bench import bench_client, bench_nats, bench_redis
from graymq.bench.common import Figures, paced_awaited, payload, timed_phases
from graymq.bench.graymq_servers import Broker, NameServer, create_topic
from graymq.bench.latency import Recorder, measure
from graymq.protocol import loop

PEER_COUNT = 200_000
PEER_BATCH = 100
AWAITED_COUNT = 20_000
E2E_RATE = 5_000.0
SYSTEMS = ("graymq", "graymq uvloop", "graymq sync flush", "redis hiredis", "redis asyncio", "nats")
_case_ids = itertools.count()


def _sequential(count: int, per_call: int, call: Callable[[int, int], Any]) -> Callable[[], Any]:
    """A phase: ``call(first, n)`` for consecutive chunks, one at a time; its seconds (``call`` may be async)."""
    async def phase() -> float:
        began = time.perf_counter()
        for first in range(0, count, per_call):
            result = call(first, min(per_call, count - first))
            if asyncio.iscoroutine(result):
                await result
        return time.perf_counter() - began
    return phase


# ---------------------------------------------------------------- graymq

async def _graymq_phases(broker: Broker, broker_name: str, ns: NameServer, count: int, awaited: int) -> Figures:
    from graymq.client import Message, Producer

    case = next(_case_ids)
    topic, group = f"BenchPeers{case}", f"bench_peers_{case}"
    admin = ns.admin()
    try:
        await create_topic(admin, topic, bench_client.QUEUES, 0, {broker_name})
    finally:
        await admin.close()
    producer = Producer(group, ns.url)
    await producer.start()
    try:
        await producer.send(Message(topic, payload(0)))  # warm-up: route, connection

        async def batch(first: int, n: int) -> None:
            await producer.send_batch([Message(topic, payload(seq)) for seq in range(first, first + n)])

        async def one(first: int, n: int) -> None:
            await producer.send(Message(topic, payload(first)))

        async def consume() -> float:
            return await bench_client.consume(ns.url, topic, group, count + 1, PEER_BATCH)

        return await timed_phases(broker, [("batched", count, _sequential(count, PEER_BATCH, batch)),
                                           ("consume", count, consume),
                                           ("awaited", awaited, _sequential(awaited, 1, one))])
    finally:
        await producer.stop()


def graymq_case(ns: NameServer, root: Path, log_dir: Path, count: int, awaited: int, *, uvloop: bool = False,
                flush: str = "async") -> Figures:
    name = f"peers{next(_case_ids)}"
    broker = Broker(name, root / name, log_dir, flush=flush, nameserver=ns.url, uvloop=uvloop).wait_ready()
    try:
        main = _graymq_phases(broker, name, ns, count, awaited)
        return loop.run(main) if uvloop else asyncio.run(main)
    finally:
        broker.stop()


async def graymq_e2e_consume(params: dict[str, Any], recorder: Recorder, ready: Callable[[], None]) -> None:
    await bench_client.latency_consume(params, recorder, ready)


async def graymq_e2e_produce(params: dict[str, Any], rate: float, count: int) -> int:
    from graymq.client import BlockingProducer, Message, Producer

    topic = params["topic"]
    if params.get("blocking"):  # the synchronous client, as redis-py's below: each send returns when acked
        with BlockingProducer(params["group"], params["ns_url"]) as blocking:
            blocking.send(Message(topic, payload(count)))  # warm-up (seq past the end: ignored)
            return await paced_awaited(rate, count, lambda seq: blocking.send(Message(topic, payload(seq))))
    producer = Producer(params["group"], params["ns_url"])
    await producer.start()
    try:
        await producer.send(Message(topic, payload(count)))  # warm-up (seq past the end: ignored)
        return await paced_awaited(rate, count, lambda seq: producer.send(Message(topic, payload(seq))))
    finally:
        await producer.stop()


def graymq_e2e_case(ns: NameServer, root: Path, log_dir: Path, duration_s: float, *, uvloop: bool = False,
                    blocking: bool = False) -> Figures:
    case = next(_case_ids)
    name, topic, group = f"peerslat{case}", f"BenchPeersE2E{case}", f"bench_peers_e2e_{case}"
    broker = Broker(name, root / name, log_dir, nameserver=ns.url, uvloop=uvloop).wait_ready()
    try:
        async def setup() -> None:
            admin = ns.admin()
            try:
                await create_topic(admin, topic, bench_client.QUEUES, 0, {name})
            finally:
                await admin.close()

        asyncio.run(setup())
        params = {"ns_url": ns.url, "topic": topic, "group": group, "uvloop": uvloop, "roles": "graymq",
                  "blocking": blocking}
        figures = measure(__name__, params, E2E_RATE, duration_s, broker.pid)
        figures["broker_peak_rss_mib"] = broker.peak_rss_mib()
        return figures
    finally:
        broker.stop()


# ---------------------------------------------------------------- Redis, redis-py's synchronous client + hiredis

def _redis(port: int) -> Any:
    import redis

    return redis.Redis(host="127.0.0.1", port=port)  # redis-py parses replies with hiredis when it is installed


def hiredis_in_use() -> bool:
    from redis.utils import HIREDIS_AVAILABLE

    return bool(HIREDIS_AVAILABLE)


def _redis_consume(r: Any, count: int, block_ms: int, on_batch: Callable[[list[Any]], None]) -> None:
    received = 0
    while received < count:
        reply = r.xreadgroup(bench_redis.GROUP, "c1", {bench_redis.STREAM: ">"}, count=PEER_BATCH, block=block_ms)
        if not reply:
            continue
        entries = reply[0][1]
        on_batch(entries)
        received += len(entries)
        r.xack(bench_redis.STREAM, bench_redis.GROUP, *[entry_id for entry_id, _ in entries])


async def _redis_phases(server: Any, count: int, awaited: int) -> Figures:
    r = _redis(server.port)
    try:
        r.ping()

        def batch(first: int, n: int) -> None:
            pipe = r.pipeline(transaction=False)
            for seq in range(first, first + n):
                pipe.xadd(bench_redis.STREAM, {b"d": payload(seq)})
            pipe.execute()

        def one(first: int, n: int) -> None:
            r.xadd(bench_redis.STREAM, {b"d": payload(first)})

        def consume() -> float:
            r.xgroup_create(bench_redis.STREAM, bench_redis.GROUP, id="0", mkstream=True)
            began = time.perf_counter()
            _redis_consume(r, count, 1000, lambda entries: None)
            return time.perf_counter() - began

        return await timed_phases(server, [("batched", count, _sequential(count, PEER_BATCH, batch)),
                                           ("consume", count, consume),
                                           ("awaited", awaited, _sequential(awaited, 1, one))])
    finally:
        r.close()


async def _redis_asyncio_phases(server: Any, count: int, awaited: int) -> Figures:
    r = bench_redis._client(server.port, 2)
    try:
        await r.ping()

        async def batch(first: int, n: int) -> None:
            pipe = r.pipeline(transaction=False)
            for seq in range(first, first + n):
                pipe.xadd(bench_redis.STREAM, {b"d": payload(seq)})
            await pipe.execute()

        async def one(first: int, n: int) -> None:
            await r.xadd(bench_redis.STREAM, {b"d": payload(first)})

        async def consume() -> float:
            return await bench_redis.consume(server.port, count, PEER_BATCH)

        return await timed_phases(server, [("batched", count, _sequential(count, PEER_BATCH, batch)),
                                           ("consume", count, consume),
                                           ("awaited", awaited, _sequential(awaited, 1, one))])
    finally:
        await r.aclose(close_connection_pool=True)


def redis_case(root: Path, log_dir: Path, count: int, awaited: int, *, asyncio_client: bool = False) -> Figures:
    name = f"redis-peers{next(_case_ids)}"
    with bench_redis.RedisServer(root / name, log_dir) as server:
        server.wait_ready()
        phases = _redis_asyncio_phases if asyncio_client else _redis_phases
        figures = asyncio.run(phases(server, count, awaited))
        figures["hiredis"] = hiredis_in_use() and not asyncio_client
        return figures


async def redis_e2e_consume(params: dict[str, Any], recorder: Recorder, ready: Callable[[], None]) -> None:
    r = _redis(params["port"])
    try:
        r.xgroup_create(bench_redis.STREAM, bench_redis.GROUP, id="$", mkstream=True)
        ready()
        while not recorder.done.is_set():
            reply = r.xreadgroup(bench_redis.GROUP, "c1", {bench_redis.STREAM: ">"}, count=PEER_BATCH, block=200)
            if not reply:
                continue
            now = time.monotonic_ns()
            entries = reply[0][1]
            for _, fields in entries:
                recorder.record(fields[b"d"], now)
            r.xack(bench_redis.STREAM, bench_redis.GROUP, *[entry_id for entry_id, _ in entries])
    finally:
        r.close()


async def redis_e2e_produce(params: dict[str, Any], rate: float, count: int) -> int:
    r = _redis(params["port"])
    try:
        r.ping()
        return await paced_awaited(rate, count, lambda seq: r.xadd(bench_redis.STREAM, {b"d": payload(seq)}))
    finally:
        r.close()


def redis_e2e_case(root: Path, log_dir: Path, duration_s: float) -> Figures:
    with bench_redis.RedisServer(root / f"redis-peers-e2e{next(_case_ids)}", log_dir) as server:
        server.wait_ready()
        figures = measure(__name__, {"port": server.port, "roles": "redis"}, E2E_RATE, duration_s, server.pid)
        figures["broker_peak_rss_mib"] = server.peak_rss_mib()
        return figures


# ---------------------------------------------------------------- NATS JetStream, nats-py

async def _nats_phases(server: Any, count: int, awaited: int) -> Figures:
    port = server.port
    await bench_nats.create_stream(port)
    nc = await bench_nats._connect(port)
    js = nc.jetstream(publish_async_max_pending=PEER_BATCH * 2)
    try:
        async def batch(first: int, n: int) -> None:
            acks = [await js.publish_async(bench_nats.SUBJECT, payload(seq)) for seq in range(first, first + n)]
            await asyncio.gather(*acks)

        async def one(first: int, n: int) -> None:
            await js.publish(bench_nats.SUBJECT, payload(first))

        async def consume() -> float:
            return await bench_nats.consume(port, count, PEER_BATCH)

        return await timed_phases(server, [("batched", count, _sequential(count, PEER_BATCH, batch)),
                                           ("consume", count, consume),
                                           ("awaited", awaited, _sequential(awaited, 1, one))])
    finally:
        await nc.close()


def nats_case(root: Path, log_dir: Path, count: int, awaited: int) -> Figures:
    with bench_nats.NatsServer(root / f"nats-peers{next(_case_ids)}", log_dir) as server:
        server.wait_ready()
        return asyncio.run(_nats_phases(server, count, awaited))


async def nats_e2e_consume(params: dict[str, Any], recorder: Recorder, ready: Callable[[], None]) -> None:
    await bench_nats.latency_consume(params, recorder, ready)


async def nats_e2e_produce(params: dict[str, Any], rate: float, count: int) -> int:
    nc = await bench_nats._connect(params["port"])
    js = nc.jetstream()
    try:
        return await paced_awaited(rate, count, lambda seq: js.publish(bench_nats.SUBJECT, payload(seq)))
    finally:
        await nc.close()


def nats_e2e_case(root: Path, log_dir: Path, duration_s: float) -> Figures:
    with bench_nats.NatsServer(root / f"nats-peers-e2e{next(_case_ids)}", log_dir) as server:
        server.wait_ready()
        asyncio.run(bench_nats.create_stream(server.port or 0))
        figures = measure(__name__, {"port": server.port, "roles": "nats"}, E2E_RATE, duration_s, server.pid)
        figures["broker_peak_rss_mib"] = server.peak_rss_mib()
        return figures


# ---------------------------------------------------------------- the latency harness's entry points

async def latency_consume(params: dict[str, Any], recorder: Recorder, ready: Callable[[], None]) -> None:
    consume = {"graymq": graymq_e2e_consume, "redis": redis_e2e_consume, "nats": nats_e2e_consume}
    await consume[params["roles"]](params, recorder, ready)


async def latency_produce(params: dict[str, Any], rate: float, count: int) -> int:
    produce = {"graymq": graymq_e2e_produce, "redis": redis_e2e_produce, "nats": nats_e2e_produce}
    return await produce[params["roles"]](params, rate, count)


def echo_rtt_us(samples: int = 2000) -> float:
    """Median round trip of a 16-byte message between this process and an echo server process on loopback."""
    import multiprocessing as mp
    import socket
    import statistics

    ctx = mp.get_context("spawn")
    ready = ctx.Queue()
    proc = ctx.Process(target=_echo_server, args=(ready,), daemon=True)
    proc.start()
    try:
        port = ready.get(timeout=30)
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            times = []
            for _ in range(samples):
                began = time.perf_counter_ns()
                sock.sendall(b"x" * 16)
                got = 0
                while got < 16:
                    got += len(sock.recv(64))
                times.append((time.perf_counter_ns() - began) / 1000)
        return statistics.median(times)
    finally:
        proc.kill()
        proc.join()


def _echo_server(ready: Any) -> None:
    import socket

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        ready.put(server.getsockname()[1])
        conn, _ = server.accept()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while data := conn.recv(64):
                conn.sendall(data)
