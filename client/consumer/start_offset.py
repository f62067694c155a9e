"""Where a consumer starts a queue its group never committed (README: "Where a consumer starts").

- a retry queue of the group: at the first message (it holds only the group's own retries);
- a group that never committed any offset: every other queue at ``consume_from`` (first, last or a
  timestamp), gray queues included — a new group does not replay the gray history;
- a group that committed offsets: a never-committed gray queue at the first message, so no gray
  message is skipped (held there for the group's gray consumers); other queues at ``consume_from``.

A start offset decided here is committed at once, so a restart resumes there instead of deciding again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from graymq.client.consumer.offset_store import OffsetStore
from graymq.client.message import MessageQueue
from graymq.protocol.broker_client import BrokerClient
from graymq.protocol.constants import retry_topic
from graymq.protocol.errors import GrayMQError

ConsumeFrom = Literal["last", "first", "timestamp"]


def start_from(consume_from: ConsumeFrom, *, retry_queue: bool, gray_queue: bool,
               group_committed: bool) -> ConsumeFrom:
    """Where a never-committed queue starts.

    >>> start_from("last", retry_queue=False, gray_queue=True, group_committed=False)
    'last'
    >>> start_from("last", retry_queue=False, gray_queue=True, group_committed=True)
    'first'
    >>> start_from("timestamp", retry_queue=False, gray_queue=False, group_committed=True)
    'timestamp'
    >>> start_from("last", retry_queue=True, gray_queue=False, group_committed=False)
    'first'
    """
    if retry_queue or (gray_queue and group_committed):
        return "first"
    return consume_from


@dataclass(frozen=True, slots=True)
class QueueToStart:
    mq: MessageQueue
    address: str
    gray_queue: bool  # a gray queue while the group's gray switch is on


class StartOffsets:
    """The offsets a consumer starts newly assigned queues at: committed, else per ``start_from``."""

    def __init__(self, brokers: BrokerClient, offset_store: OffsetStore, group: str, consume_from: ConsumeFrom,
                 timestamp_ms: int = 0) -> None:
        self.brokers = brokers
        self.offset_store = offset_store
        self.group = group
        self.consume_from = consume_from
        self.timestamp_ms = timestamp_ms

    async def plan(self, queues: list[QueueToStart],
                   addresses: Iterable[str]) -> dict[MessageQueue, int | GrayMQError]:
        """Start offset per queue, or why it cannot start yet (a broker did not answer).

        Whether the group committed anything is asked of ``addresses`` (every broker of its topics)
        before any of these queues commits its start, and only when a never-committed gray queue
        depends on it.
        """
        result: dict[MessageQueue, int | GrayMQError] = {}
        committed = await asyncio.gather(*(self.offset_store.read(q.mq, q.address) for q in queues),
                                         return_exceptions=True)
        fresh: list[QueueToStart] = []
        for q, offset in zip(queues, committed, strict=True):
            if isinstance(offset, BaseException) and not isinstance(offset, GrayMQError):
                raise offset
            if isinstance(offset, GrayMQError) or offset >= 0:
                result[q.mq] = offset  # committed, or unknown: the queue waits for the next rebalance
            else:
                fresh.append(q)
        group_committed: bool | GrayMQError = False
        if any(self._depends_on_history(q) for q in fresh):
            try:
                group_committed = await self.offset_store.group_committed(addresses)
            except GrayMQError as exc:
                group_committed = exc
        starts = await asyncio.gather(*(self._start(q, group_committed) for q in fresh), return_exceptions=True)
        for q, start in zip(fresh, starts, strict=True):
            if isinstance(start, BaseException) and not isinstance(start, GrayMQError):
                raise start
            result[q.mq] = start
        return result

    def _retry_queue(self, q: QueueToStart) -> bool:
        return q.mq.topic == retry_topic(self.group)

    def _depends_on_history(self, q: QueueToStart) -> bool:
        return q.gray_queue and not self._retry_queue(q) and self.consume_from != "first"

    async def _start(self, q: QueueToStart, group_committed: bool | GrayMQError) -> int:
        """Decide, resolve and commit the start offset of a never-committed queue."""
        if isinstance(group_committed, GrayMQError) and self._depends_on_history(q):
            raise group_committed
        where = start_from(self.consume_from, retry_queue=self._retry_queue(q), gray_queue=q.gray_queue,
                           group_committed=group_committed is True)
        mq, address = q.mq, q.address
        if where == "first":
            offset = await self.brokers.min_offset(address, mq.topic, mq.queue_id)
        elif where == "timestamp":
            offset = await self.brokers.search_offset(address, mq.topic, mq.queue_id, self.timestamp_ms)
        else:
            offset = await self.brokers.max_offset(address, mq.topic, mq.queue_id)
        await self.offset_store.write(mq, address, offset)
        return offset
