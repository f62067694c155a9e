"""Helpers of the Spark tests: polling with a deadline, a producer, a sink that records every micro-batch, the xdist
group of the tests running Spark in a process of their own."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from graymq.client import Message, PullConsumer
from graymq.client.sync import SyncProducer

# A test that runs Spark in a process of its own (its own JVM, not the session of tests/spark/conftest.py) need not
# wait behind the ``spark`` group's tests on their worker: under pytest-xdist such tests share a group of their own,
# so one of them at a time runs beside the session's.
OWN_SPARK_PROCESS = pytest.mark.xdist_group("spark_processes")


def poll_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    """The first truthy value of ``predicate()``; AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def send(producer: SyncProducer, topic: str, count: int, *, gray: bool, tag: str = "") -> list[str]:
    """Send ``count`` messages; their msg ids."""
    prefix = "g" if gray else "n"
    return [producer.send(Message(topic, f"{prefix}{i}".encode(), tags=tag, gray=gray)).msg_id for i in range(count)]


def committed_and_max(ns_url: str, group: str, topic: str) -> tuple[dict, dict]:
    """The group's committed offsets and the max offsets of the topic's normal queues, asked of the broker."""

    async def ask() -> tuple[dict, dict]:
        consumer = PullConsumer(group, ns_url, register=False)
        try:
            queues = await consumer.fetch_queues(topic, gray=False)
            return ({mq: await consumer.committed_offset(mq) for mq in queues},
                    {mq: await consumer.max_offset(mq) for mq in queues})
        finally:
            await consumer.stop()

    return asyncio.run(ask())


class BatchLog:
    """A ``foreachBatch`` sink that writes every call (batch id, time, rows) to its own JSON file."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def sink(self, side: str, fail_once_on: int | None = None) -> Callable[[Any, int], None]:
        directory = self.root / side
        directory.mkdir(parents=True, exist_ok=True)
        failed_marker = directory / "failed-once"

        def write(frame: Any, batch_id: int) -> None:
            rows = [r.asDict() for r in frame.select("msg_id", "queue_id", "queue_offset", "gray").collect()]
            record = {"batch_id": batch_id, "at": time.time(), "rows": rows}
            (directory / f"{batch_id:05d}-{uuid.uuid4().hex[:8]}.json").write_text(json.dumps(record))
            if batch_id == fail_once_on and not failed_marker.exists():
                failed_marker.touch()
                raise RuntimeError(f"sink fails batch {batch_id} once (test)")

        return write

    def calls(self, side: str) -> list[dict[str, Any]]:
        directory = self.root / side
        files = sorted(directory.glob("*.json")) if directory.exists() else []
        return [json.loads(f.read_text()) for f in files]

    def msg_ids(self, side: str) -> list[str]:
        return [row["msg_id"] for call in self.calls(side) for row in call["rows"]]
