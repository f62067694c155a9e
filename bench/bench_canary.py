"""Weighted canary figures: how fast a weight change reaches every consumer, and how fast a rollout's automatic
rollback completes once a check failed. In-process consumers and producer, a broker process, the name server
of the ``gray`` part.

- **weight**: 2 normal consumers and 1 gray, a topic of 8 queues (2 gray), a normal producer at 200 msg/s; the
  weight goes 0 → 50 → 0. Figures: seconds from each change to every consumer holding its new queues (the gray
  one: the gray queues and the weighted ones, the normal ones the rest, each once).
- **rollback**: the same group, the gray consumer's listener failing every other batch; a rollout of one step
  (25 %, 1 s, 20 messages) fails its check. Figures: seconds from the failed check to the gray consumer retired
  holding nothing (v2 gets no more messages), and to the rollback complete (also the gray backlog 0: what v2
  sent back for a retry is consumed by v1 once its retry delay has passed, so this follows the retry schedule),
  and messages lost once v1 consumed everything (0).
"""

from __future__ import annotations

import asyncio
import io
import itertools
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from graymq.bench.bench_gray import Received, _setup
from graymq.bench.common import Figures, paced, payload, wait_until
from graymq.bench.graymq_servers import NameServer
from graymq.client import ConsumeStatus, Message, Producer, PushConsumer
from graymq.core.queue_layout import gray_queue_ids, weighted_queue_ids
from graymq.protocol.errors import GrayMQError
from graymq.runbooks.policy import CutoverPolicy, RolloutPolicy
from graymq.runbooks.progress import Progress
from graymq.runbooks.rollout import RolloutRunner

QUEUES, GRAY = 8, 2


def holds(consumers: Sequence[PushConsumer], topic: str, weight: int) -> bool:
    """The gray consumer holds the gray and weighted queues, the normal ones the rest, each queue once."""
    gray_side = set(gray_queue_ids(QUEUES, GRAY)) | set(weighted_queue_ids(QUEUES, GRAY, weight))
    held: list[int] = []
    for c in consumers:
        mine = {mq.queue_id for mq in c.assigned() if mq.topic == topic}
        if c.gray and mine != gray_side:
            return False
        held += mine
    return sorted(held) == list(range(QUEUES))


class FailingHalf:
    """A listener that fails every other batch it sees (it comes back through the retry topic)."""

    def __init__(self, received: Received) -> None:
        self.accept = received.listener()
        self.calls = itertools.count()

    async def __call__(self, messages: list[Any]) -> ConsumeStatus | None:
        if next(self.calls) % 2:
            return ConsumeStatus.RECONSUME_LATER
        await self.accept(messages)
        return None


class TimedProgress(Progress):
    """Progress that remembers when a check failed (the note of its verdict)."""

    def __init__(self) -> None:
        super().__init__(io.StringIO())
        self.failed_at = 0.0

    def note(self, text: str) -> None:
        if "→ fail" in text and not self.failed_at:
            self.failed_at = time.monotonic()
        super().note(text)


async def _group(ns: NameServer, root: Path, log_dir: Path, gray_listener: Any,
                 received: Received) -> tuple[Any, str, str, list[PushConsumer], Producer]:
    broker, topic, group, _ = await _setup(ns, root, log_dir, QUEUES, GRAY)
    consumers = [PushConsumer(group, ns.url, listener=received.listener(), client_id=f"v1{i}") for i in "ab"]
    consumers.append(PushConsumer(group, ns.url, listener=gray_listener, client_id="v2a", gray=True))
    for c in consumers:
        c.subscribe(topic)
        await c.start()
    producer = Producer(f"{group}_producers", ns.url)
    await producer.start()
    await wait_until(lambda: holds(consumers, topic, 0), 60, "the initial allocation")
    return broker, topic, group, consumers, producer


async def weight_case(ns: NameServer, root: Path, log_dir: Path) -> Figures:
    received = Received()
    broker, topic, group, consumers, producer = await _group(ns, root, log_dir, received.listener(), received)
    admin = ns.admin()
    sent: list[asyncio.Future[Any]] = []
    try:
        producing = asyncio.create_task(paced(200, 10**9, lambda first, n: sent.extend(
            producer.send_async(Message(topic, payload(first + i))) for i in range(n))))
        figures: Figures = {}
        for weight in (50, 0):
            await asyncio.sleep(1.0)  # under load
            began = time.monotonic()
            await admin.set_weight(group, weight, "bench")
            done = await wait_until(lambda w=weight: holds(consumers, topic, w), 30, f"every client at {weight}%")
            figures[f"weight_to_{weight}_rebalanced_s"] = done - began
        producing.cancel()
        await asyncio.gather(producing, return_exceptions=True)
        ok = sum(1 for o in await asyncio.gather(*sent, return_exceptions=True) if not isinstance(o, BaseException))
        await wait_until(lambda: len(received.seqs) >= ok, 60, "every acknowledged message consumed")
        return {**figures, "sent": ok, "lost": ok - len(received.seqs)}
    finally:
        await _stop(consumers, producer, admin, broker)


async def rollback_case(ns: NameServer, root: Path, log_dir: Path) -> Figures:
    received = Received()
    broker, topic, group, consumers, producer = await _group(ns, root, log_dir, FailingHalf(received), received)
    admin = ns.admin()
    sent: list[asyncio.Future[Any]] = []
    progress = TimedProgress()
    runner = RolloutRunner(admin, group, RolloutPolicy([25], 1.0, min_messages=20), CutoverPolicy(timeout_s=120),
                           progress=progress)
    try:
        producing = asyncio.create_task(paced(200, 1000, lambda first, n: sent.extend(
            producer.send_async(Message(topic, payload(first + i))) for i in range(n))))
        v2 = consumers[-1]
        retiring = asyncio.create_task(wait_until(lambda: v2.retired and not v2.assigned(), 120, "v2 retired"))
        report = await runner.rollout()
        done = time.monotonic()
        retired_at = await retiring
        if report.outcome != "ROLLED_BACK":
            raise GrayMQError(f"the rollout ended {report.outcome}, not rolled back: {report.message}")
        await producing
        ok = sum(1 for o in await asyncio.gather(*sent, return_exceptions=True) if not isinstance(o, BaseException))
        await wait_until(lambda: len(received.seqs) >= ok, 120, "every acknowledged message consumed")
        return {"failed_check_to_retired_s": retired_at - progress.failed_at,
                "failed_check_to_rolled_back_s": done - progress.failed_at,
                "gray_failure_rate_pct": report.checks[-1]["gray"]["failed"] * 100.0 / max(
                    1, report.checks[-1]["gray"]["failed"] + report.checks[-1]["gray"]["consumed"]),
                "sent": ok, "lost": ok - len(received.seqs)}
    finally:
        await runner.close()
        await _stop(consumers, producer, admin, broker)


async def _stop(consumers: Sequence[PushConsumer], producer: Producer, admin: Any, broker: Any) -> None:
    await asyncio.gather(*(c.stop() for c in consumers), return_exceptions=True)
    await producer.stop()
    await admin.close()
    broker.stop()
