"""Gray-release figures with the client library and the cutover runner against a name server (SQLite)
and a broker process; consumers and producers are in-process.

- **promote**: 2 normal and 2 gray consumers, a normal and a gray producer (one producer group)
  sending 200 msg/s each; ``CutoverRunner.promote()``. Figures: promote duration and its steps,
  and the time from the last gray message consumed to every consumer rebalanced (all normal,
  each normal queue held by exactly one of them, the gray queues by none); messages lost (0).
- **drain**: a gray producer leaves a backlog of N gray messages (``send_batch``); one gray and one
  normal consumer start (default consumer settings) and a promote starts at once. Figures: drain
  rate (N / time until the gray consumer consumed them all) and promote duration.
- **rebalance**: 50 consumers (40 normal, 10 gray) of one group on a topic of 100 queues (10 gray)
  start together; time until the allocation converges; then one consumer joins and one leaves,
  time until it converges again. Converged: every queue held by exactly one consumer of its side,
  each side's consumers holding counts that differ by at most one.

Client settings are the library's defaults (name server heartbeat 1 s, producer heartbeat 2 s,
rebalance interval 5 s, long poll 5 s; flag changes arrive through the name server watch).
"""

from __future__ import annotations

import asyncio
import io
import itertools
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from graymq.bench.common import BATCH, Figures, paced, payload, quiet_logs, wait_until
from graymq.bench.graymq_servers import Broker, NameServer, create_topic
from graymq.client import Message, Producer, PushConsumer
from graymq.core.queue_layout import gray_queue_ids
from graymq.runbooks.cutover import CutoverRunner
from graymq.runbooks.policy import CutoverPolicy
from graymq.runbooks.progress import Progress

_case_ids = itertools.count()


class Received:
    """What every consumer got: sequence numbers, and when the last gray message was consumed."""

    def __init__(self) -> None:
        self.seqs: set[int] = set()
        self.gray_count = 0
        self.last_gray_at = 0.0

    def listener(self) -> Any:
        async def on_messages(messages: list[Any]) -> None:
            now = time.monotonic()
            for message in messages:
                self.seqs.add(int.from_bytes(message.body[8:16], "big"))
                if message.gray:
                    self.gray_count += 1
                    self.last_gray_at = now

        return on_messages


def allocation(consumers: Sequence[PushConsumer], topic: str) -> str:
    """Who holds what, for error messages."""
    return "; ".join(f"{c.client_id}{'(gray)' if c.gray else ''}: "
                     f"{sorted(mq.queue_id for mq in c.assigned() if mq.topic == topic)}" for c in consumers)


def converged(consumers: Sequence[PushConsumer], topic: str, queue_nums: int, gray_nums: int) -> bool:
    """Every queue of ``topic`` held by exactly one consumer of its side; each side evenly spread."""
    gray_ids = set(gray_queue_ids(queue_nums, gray_nums))
    holders: dict[int, int] = {}
    counts: dict[bool, list[int]] = {True: [], False: []}
    for consumer in consumers:
        mine = [mq.queue_id for mq in consumer.assigned() if mq.topic == topic]
        counts[consumer.gray].append(len(mine))
        for queue_id in mine:
            if (queue_id in gray_ids) != consumer.gray or queue_id in holders:
                return False
            holders[queue_id] = 1
    expected = set(range(queue_nums)) if counts[True] else set(range(queue_nums)) - gray_ids
    return set(holders) == expected and all(max(c) - min(c) <= 1 for c in counts.values() if c)


async def _setup(ns: NameServer, root: Path, log_dir: Path, queues: int, gray: int, lane_slots: int = 1
                 ) -> tuple[Broker, str, str, str]:
    case = next(_case_ids)
    name, topic, group = f"gray{case}", f"BenchGray{case}", f"bench_gray_{case}"
    broker = Broker(name, root / name, log_dir, nameserver=ns.url).wait_ready()
    admin = ns.admin()
    try:
        await create_topic(admin, topic, queues, gray, {name}, lane_slots=lane_slots)
    finally:
        await admin.close()
    return broker, topic, group, f"{group}_producers"


async def _promote(ns: NameServer, group: str, producer_group: str) -> tuple[float, dict[str, float]]:
    admin = ns.admin()
    runner = CutoverRunner(admin, group, CutoverPolicy((producer_group,), timeout_s=300), Progress(io.StringIO()))
    try:
        began = time.monotonic()
        report = await runner.promote()
        return time.monotonic() - began, dict(report.timings_s)
    finally:
        await runner.close()
        await admin.close()


async def promote_case(ns: NameServer, root: Path, log_dir: Path, rate: float = 200.0) -> Figures:
    queues, gray_nums = 8, 2
    broker, topic, group, producer_group = await _setup(ns, root, log_dir, queues, gray_nums)
    received = Received()
    consumers = [PushConsumer(group, ns.url, listener=received.listener(), client_id=f"{kind}{i}",
                              gray=kind == "gray")
                 for kind in ("normal", "gray") for i in range(2)]
    normal = Producer(producer_group, ns.url, gray=False)
    gray = Producer(producer_group, ns.url, gray=True)
    sent: list[asyncio.Future[Any]] = []
    seqs = itertools.count()
    try:
        for c in consumers:
            c.subscribe(topic)
            await c.start()
        await normal.start()
        await gray.start()
        await wait_until(lambda: converged(consumers, topic, queues, gray_nums), 60, "initial allocation")

        def send(first: int, n: int) -> None:
            for _ in range(n):
                for producer in (normal, gray):
                    sent.append(producer.send_async(Message(topic, payload(next(seqs)))))

        producing = asyncio.create_task(paced(rate, 10**9, send))
        await asyncio.sleep(2.0)
        promote_s, timings = await _promote(ns, group, producer_group)
        promoted_at = time.monotonic()
        rebalanced_at = await wait_until(
            lambda: not any(c.gray for c in consumers) and converged(consumers, topic, queues, gray_nums), 60,
            "every consumer rebalanced after the promote")
        producing.cancel()
        await asyncio.gather(producing, return_exceptions=True)
        outcomes = await asyncio.gather(*sent, return_exceptions=True)
        ok = sum(1 for o in outcomes if not isinstance(o, BaseException))
        await wait_until(lambda: len(received.seqs) >= ok, 60, "every acknowledged message consumed")
        return {
            "promote_s": promote_s, **{f"promote_{k}_s": v for k, v in timings.items()},
            "last_gray_to_rebalanced_s": rebalanced_at - received.last_gray_at,
            "promote_end_to_rebalanced_s": rebalanced_at - promoted_at,
            "gray_messages": received.gray_count, "sent": ok, "lost": ok - len(received.seqs),
        }
    finally:
        for c in consumers:
            await c.stop()
        await normal.stop()
        await gray.stop()
        broker.stop()


async def drain_case(ns: NameServer, root: Path, log_dir: Path, backlog: int) -> Figures:
    queues, gray_nums = 8, 2
    broker, topic, group, producer_group = await _setup(ns, root, log_dir, queues, gray_nums)
    received = Received()
    producer = Producer(producer_group, ns.url, gray=True)
    gray_consumer = PushConsumer(group, ns.url, listener=received.listener(), client_id="gray0", gray=True)
    normal_consumer = PushConsumer(group, ns.url, listener=received.listener(), client_id="normal0", gray=False)
    try:
        await producer.start()
        began = time.monotonic()
        for first in range(0, backlog, BATCH):
            await producer.send_batch([Message(topic, payload(s)) for s in range(first, min(backlog, first + BATCH))])
        fill_s = time.monotonic() - began
        # The producer stays up (idle) through the promote, as a gray pod does: a stopped producer is
        # still listed gray by the name server until it expires, and the promote waits for it.
        for c in (normal_consumer, gray_consumer):
            c.subscribe(topic)
        await normal_consumer.start()
        started = time.monotonic()
        await gray_consumer.start()
        promoting = asyncio.create_task(_promote(ns, group, producer_group))
        drained_at = await wait_until(lambda: received.gray_count >= backlog, 600, "the gray backlog drained", 0.01)
        promote_s, timings = await promoting
        return {
            "backlog": backlog, "fill_msgs_s": backlog / fill_s, "drain_msgs_s": backlog / (drained_at - started),
            "drain_s": drained_at - started, "promote_s": promote_s,
            **{f"promote_{k}_s": v for k, v in timings.items()},
            "lost": backlog - len(received.seqs),
        }
    finally:
        for c in (gray_consumer, normal_consumer):
            await c.stop()
        await producer.stop()
        broker.stop()


class _CpuMeter:
    """CPU seconds of the broker, the name server and this process (the consumers) since the last lap."""

    def __init__(self, broker: Broker, ns: NameServer) -> None:
        self._sources = {"broker_cpu_s": broker.cpu_seconds, "nameserver_cpu_s": ns.cpu_seconds,
                         "consumers_cpu_s": time.process_time}
        self._last = {key: read() for key, read in self._sources.items()}

    def lap(self) -> dict[str, float]:
        now = {key: read() for key, read in self._sources.items()}
        spent = {key: now[key] - self._last[key] for key in now}
        self._last = now
        return spent


async def rebalance_case(ns: NameServer, root: Path, log_dir: Path, consumers_n: int = 50) -> Figures:
    queues, gray_nums = 100, 10
    gray_n = consumers_n // 5
    broker, topic, group, _ = await _setup(ns, root, log_dir, queues, gray_nums)
    received = Received()

    def make(i: int, gray: bool) -> PushConsumer:
        c = PushConsumer(group, ns.url, listener=received.listener(), client_id=f"c{i:03d}", gray=gray)
        c.subscribe(topic)
        return c

    consumers = [make(i, i < gray_n) for i in range(consumers_n)]
    started: list[PushConsumer] = []
    try:
        began = time.monotonic()

        async def start(c: PushConsumer) -> None:
            await c.start()
            started.append(c)

        await asyncio.gather(*(start(c) for c in consumers))
        all_started = time.monotonic()
        converged_at = await wait_until(lambda: converged(consumers, topic, queues, gray_nums), 120,
                                        f"{consumers_n} consumers converged", 0.01)
        cpu = _CpuMeter(broker, ns)
        joiner = make(consumers_n, False)
        join_began = time.monotonic()
        await joiner.start()
        started.append(joiner)
        members = [*consumers, joiner]
        joined_at = await wait_until(lambda: converged(members, topic, queues, gray_nums), 120,
                                     "converged after a join", 0.01)
        join_cpu = cpu.lap()
        leaver = consumers[-1]
        leave_began = time.monotonic()
        await leaver.stop()
        started.remove(leaver)
        members.remove(leaver)
        left_at = await wait_until(lambda: converged(members, topic, queues, gray_nums), 120,
                                   "converged after a leave", 0.01)
        leave_cpu = cpu.lap()
        return {
            "consumers": consumers_n, "start_s": all_started - began,
            "converge_after_start_s": converged_at - all_started,
            "converge_after_join_s": joined_at - join_began, "converge_after_leave_s": left_at - leave_began,
            **{f"join_{k}": v for k, v in join_cpu.items()}, **{f"leave_{k}": v for k, v in leave_cpu.items()},
        }
    finally:
        await asyncio.gather(*(c.stop() for c in started), return_exceptions=True)
        broker.stop()


async def run_all(ns: NameServer, root: Path, backlog: int, consumers_n: int) -> dict[str, Figures]:
    with quiet_logs():
        return {
            "promote": await promote_case(ns, root, root),
            "drain": await drain_case(ns, root, root, backlog),
            "rebalance": await rebalance_case(ns, root, root, consumers_n),
        }
