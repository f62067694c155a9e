"""Executor side of the sink: one task's rows sent as numbered requests to fixed queues, so a replay is stored once.

A task's identity is (the streaming query's id or the batch write's id, batch id, partition id). From it:

- producer id: 64 bits of a hash of (query or write id, partition id) — the same for every attempt of the
  task, and for the same partition of the query's later batches;
- queue of a row: with a ``sharding_key``, crc32(key) over the side's queues (as any producer picks it);
  else the queue at ``(partition id + batch id) % queues``, so a task writes one queue and batches well;
- requests: rows in order, per queue, cut at ``batchMaxMessages`` / ``batchMaxBytes``; the n-th request of
  the task to a queue is numbered ``batch id << SEQUENCE_BITS | n`` and its message ids are a hash of
  (producer id, queue, number, index).

An attempt that repeats a task (a retried or speculative task, a micro-batch run again after a driver
restart from its checkpoint) therefore sends the very same requests, and the broker's idempotent-producer
table (``graymq.broker_ext.processors.producer_table``) answers the ones it stored already without storing them again.
This holds while the rows of a partition come in the same order (a plain read-map-write pipeline; not after
a shuffle without a sort) and the topic's queues are unchanged between the attempts.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from graymq.client.lane_slots import route_with_slot
from graymq.client.message import Message, MessageQueue
from graymq.client.producer import Producer
from graymq.client.spark.sink_options import SinkOptions
from graymq.client.spark.sink_schema import SinkColumns
from graymq.client.spark.spans import SendSpans, send_spans
from graymq.client.sync import SyncFacade
from graymq.nameserver_api.membership import new_client_id
from graymq.protocol.errors import GrayMQError, LaneSlotError

SEQUENCE_BITS = 24  # requests per task and queue below 16 M; the batch id above


class SinkTaskError(GrayMQError):
    """A sink task failed; the message says how many of its rows were stored before."""


def _hash(text: str, size: int) -> bytes:
    return hashlib.blake2b(text.encode(), digest_size=size).digest()


@dataclass(frozen=True, slots=True)
class TaskIdentity:
    """Who writes: the query's (or batch write's) id, the micro-batch (0 for a batch write) and the partition."""

    write_id: str
    batch_id: int
    partition_id: int

    @property
    def producer_id(self) -> int:
        return int.from_bytes(_hash(f"{self.write_id}:{self.partition_id}", 8), "big") or 1

    def sequence(self, request: int) -> int:
        return self.batch_id << SEQUENCE_BITS | request

    def queue(self, candidates: list[MessageQueue], sharding_key: str | None) -> MessageQueue:
        if sharding_key is not None:
            return candidates[zlib.crc32(sharding_key.encode()) % len(candidates)]
        return candidates[(self.partition_id + self.batch_id) % len(candidates)]

    def msg_ids(self, mq: MessageQueue, sequence: int, count: int) -> list[str]:
        prefix = f"{self.producer_id:x}:{mq.topic}:{mq.broker_name}:{mq.queue_id}:{sequence}"
        return [_hash(f"{prefix}:{i}", 16).hex().upper() for i in range(count)]


class SinkProducer:
    """The task's producer (registered in ``producerGroup`` on the task's side, base or its lane, unless
    ``registerProducer`` is false) under the task's producer id."""

    def __init__(self, options: SinkOptions, identity: TaskIdentity, client_id: str) -> None:
        self.options = options
        self.producer = Producer(options.producer_group, options.nameserver, client_id=client_id,
                                 gray=options.gray, lane=options.lane, token=options.token,
                                 retry_times=options.retry_times, send_timeout_s=options.send_timeout_s,
                                 auto_batch=False, register=options.register_producer)
        self.producer.producer_id = identity.producer_id

    async def start(self) -> None:
        await self.producer.start()

    async def stop(self) -> None:
        await self.producer.stop()

    async def candidates(self, topic: str) -> list[MessageQueue]:
        """The queues of the task's side (base, or its lane's slot) in ``topic``, in route order (the same on every
        attempt)."""
        route = await self.producer.routes.get(topic)
        try:
            return self.producer.selector.candidates(route, self.options.side, self.producer.gray_switch)
        except LaneSlotError as missing:  # the job's lane writes to the topic first: it takes a slot
            route = await route_with_slot(self.producer.nameserver, self.producer.routes, missing)
            return self.producer.selector.candidates(route, self.options.side, self.producer.gray_switch)

    async def send(self, mq: MessageQueue, messages: list[Message], sequence: int, msg_ids: list[str]) -> int:
        return len(await self.producer.send_batch_to(mq, messages, sequence, gray=self.options.side, msg_ids=msg_ids))


@dataclass
class _Request:
    messages: list[Message] = field(default_factory=list)
    size: int = 0
    spans: list[Any] = field(default_factory=list)  # each message's send span while tracing is on


class PartitionWriter:
    """One task's rows → requests; ``stored`` counts the rows the brokers acknowledged (first time or replayed)."""

    def __init__(self, options: SinkOptions, columns: SinkColumns, identity: TaskIdentity) -> None:
        self.options, self.columns, self.identity = options, columns, identity
        self.stored = 0
        client_id = new_client_id("spark-sink")
        self._producer = SyncFacade(lambda: SinkProducer(options, identity, client_id))
        self._spans: SendSpans | None = send_spans(options.producer_group, client_id, options.side)
        self._candidates: dict[str, list[MessageQueue]] = {}
        self._open: dict[MessageQueue, _Request] = {}
        self._numbers: dict[MessageQueue, int] = {}

    def write(self, rows: Iterable[tuple[object, ...]]) -> int:
        """Send every row; a failure is a ``SinkTaskError`` saying how many rows were stored."""
        try:
            self._producer.start()
            for row in rows:
                self._add(self.columns.message(row, self.options.topic))
            for mq in list(self._open):
                self._flush(mq)
        except Exception as exc:  # re-raised with what was stored, whatever the cause (a row, a broker, a UDF)
            for request in self._open.values():  # rows never sent: their spans end as failed too
                SendSpans.failed(request.spans, exc)
            raise SinkTaskError(f"graymq sink: partition {self.identity.partition_id} of batch "
                                f"{self.identity.batch_id} stopped after {self.stored} of its rows were stored "
                                f"(write or query id {self.identity.write_id}): {exc}") from exc
        finally:
            self._producer.stop()
        return self.stored

    def _add(self, message: Message) -> None:
        candidates = self._candidates.get(message.topic)
        if candidates is None:
            candidates = self._candidates[message.topic] = self._producer.candidates(message.topic)
        mq = self.identity.queue(candidates, message.sharding_key)
        request = self._open.setdefault(mq, _Request())
        if self._spans is not None:
            span, message = self._spans.started(message)
            request.spans.append(span)
        request.messages.append(message)
        request.size += len(message.body)
        if len(request.messages) >= self.options.batch_max_messages or request.size >= self.options.batch_max_bytes:
            self._flush(mq)

    def _flush(self, mq: MessageQueue) -> None:
        request = self._open.pop(mq)
        number = self._numbers.get(mq, 0)
        self._numbers[mq] = number + 1
        sequence = self.identity.sequence(number)
        ids = self.identity.msg_ids(mq, sequence, len(request.messages))
        try:
            self.stored += self._producer.send(mq, request.messages, sequence, ids)
        except Exception as exc:  # the spans say so; the task's error says the rest
            SendSpans.failed(request.spans, exc)
            raise
        SendSpans.stored(request.spans, mq, ids)
