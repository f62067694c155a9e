"""graymq end to end with the client library (issue 5, and graymq's rows in the comparison with the
peers): ``Producer`` and ``PushConsumer`` against a name server (SQLite) and a broker process.

- produce, single: ``Producer(auto_batch=False).send``, 64 outstanding (one request per message); auto: the
  same with the default producer (``auto_batch``: the sends of one loop turn leave as one request); batch:
  ``Producer.send_batch`` of 64, 4 outstanding;
- consume: a ``PushConsumer`` from the first offset, pulls of 64, the listener called with batches
  of 64 (``consume_batch_size``) — the same batch the peers' consumers get;
- latency: ``Producer.send_async`` of each message as it is due (the default producer: the messages due at
  one tick leave together, like Redis's pipeline; and with ``auto_batch=False``); a
  ``PushConsumer`` in another process whose listener takes what a pull brought (``consume_batch_size``
  64, as the peers' consumers handle a fetched batch in one go).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from graymq.bench.common import (
    BATCH,
    Figures,
    paced,
    payload,
    produce_consume_figures,
    timed_produce,
    wait_until,
)
from graymq.bench.graymq_servers import Broker, NameServer, create_topic
from graymq.bench.latency import InFlight, Recorder, measure
from graymq.client import Message, Producer, PushConsumer

QUEUES = 8
_case_ids = itertools.count()


async def produce(ns_url: str, topic: str, group: str, count: int, batched: bool, auto_batch: bool = True) -> float:
    producer = Producer(group, ns_url, auto_batch=auto_batch)
    await producer.start()
    try:
        await producer.send(Message(topic, payload(0)))  # warm-up: route, connection

        async def single(first: int, n: int) -> None:
            await producer.send(Message(topic, payload(first)))

        async def batch(first: int, n: int) -> None:
            await producer.send_batch([Message(topic, payload(seq)) for seq in range(first, first + n)])

        return await timed_produce(count, batched, single, batch)
    finally:
        await producer.stop()


async def consume(ns_url: str, topic: str, group: str, count: int, batch: int = BATCH) -> float:
    received = 0
    first_at: float | None = None

    async def listener(messages: list[Any]) -> None:
        nonlocal received, first_at
        if first_at is None:
            first_at = time.monotonic()
        received += len(messages)

    consumer = PushConsumer(group, ns_url, listener=listener, consume_from="first", pull_batch_size=batch,
                            consume_batch_size=batch)
    consumer.subscribe(topic)
    await consumer.start()
    try:
        end = await wait_until(lambda: received >= count, 300, f"{count} messages consumed")
    finally:
        await consumer.stop()
    assert first_at is not None
    return end - first_at


async def throughput_case(ns: NameServer, root: Path, log_dir: Path, flush: str, batched: bool,
                          count: int, auto_batch: bool = True) -> Figures:
    case = next(_case_ids)
    name, topic, group = f"e2e{case}", f"BenchE2E{case}", f"bench_e2e_{case}"
    broker = Broker(name, root / name, log_dir, flush=flush, nameserver=ns.url).wait_ready()
    try:
        admin = ns.admin()
        try:
            await create_topic(admin, topic, QUEUES, 0, {name})
        finally:
            await admin.close()
        return await produce_consume_figures(
            broker, count, lambda: produce(ns.url, topic, group, count, batched, auto_batch),
            lambda: consume(ns.url, topic, group, count + 1))
    finally:
        broker.stop()


async def latency_consume(params: dict[str, Any], recorder: Recorder, ready: Callable[[], None]) -> None:
    async def listener(messages: list[Any]) -> None:
        now = time.monotonic_ns()
        for message in messages:
            recorder.record(message.body, now)

    consumer = PushConsumer(params["group"], params["ns_url"], listener=listener, consume_from="last",
                            consume_batch_size=BATCH)
    consumer.subscribe(params["topic"])
    await consumer.start()
    try:
        await wait_until(lambda: len([q for q in consumer.assigned() if q.topic == params["topic"]]) == QUEUES,
                         60, "the consumer holding every queue", 0.05)
        ready()
        await recorder.done.wait()
    finally:
        await consumer.stop()


async def latency_produce(params: dict[str, Any], rate: float, count: int) -> int:
    producer = Producer(params["group"], params["ns_url"], auto_batch=params.get("auto_batch", True))
    await producer.start()
    topic = params["topic"]
    try:
        await producer.send(Message(topic, payload(count)))  # warm-up (seq past the end: ignored)
        in_flight = InFlight()

        def send(first: int, n: int) -> None:
            for seq in range(first, first + n):
                in_flight.track(producer.send_async(Message(topic, payload(seq)), callback=_ignore))

        await paced(rate, count, send)
        return await in_flight.acked_when_done()
    finally:
        await producer.stop()


def _ignore(result: object, error: BaseException | None) -> None:
    """Send errors are counted from the tasks' outcomes, not logged one by one."""


def latency_case(ns: NameServer, root: Path, log_dir: Path, rate: float, duration_s: float,
                 auto_batch: bool = True) -> Figures:
    case = next(_case_ids)
    name, topic, group = f"lat{case}", f"BenchLatency{case}", f"bench_latency_{case}"
    broker = Broker(name, root / name, log_dir, nameserver=ns.url).wait_ready()
    try:
        ns.create_topic(topic, QUEUES, 0, {name})
        figures = measure(__name__, {"ns_url": ns.url, "topic": topic, "group": group, "auto_batch": auto_batch},
                          rate, duration_s, broker.pid)
        figures["broker_peak_rss_mib"] = broker.peak_rss_mib()
        return figures
    finally:
        broker.stop()
