"""Executor side: one input partition is one queue's offset range, read with pulls into Arrow batches."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from graymq.client.message import MessageQueue, PullStatus
from graymq.client.spark.options import SourceOptions
from graymq.client.spark.schema import to_record_batch
from graymq.client.spark.spans import receive_spans
from graymq.client.sync import SyncPullConsumer
from graymq.protocol.errors import OffsetIllegalError, RequestTimeoutError

NO_NEW_MSG_WAIT_S = 1.0
STALL_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class QueueRange(InputPartition):
    """Offsets ``[start, end)`` of one queue: ``end`` is fixed when the batch is planned."""

    topic: str
    broker_name: str
    queue_id: int
    start: int
    end: int

    @property
    def queue(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker_name, self.queue_id)


def read_range(options: SourceOptions, part: InputPartition) -> Iterator[pa.RecordBatch]:
    """Every message of the range that matches the tag expression, one Arrow batch per pull.

    An offset below the queue's minimum (aged out by retention) fails the task rather than
    skipping silently; a range end the broker does not reach within ``STALL_TIMEOUT_S`` too. A
    damaged record is skipped, not fatal: the pull consumer logs it at ERROR with its topic, queue
    and offset and counts it (``skipped_records``), and the rest of the range is read. Pulls carry the job's lane,
    and a base job's pull of a lane's queue says it was adopted, as the brokers' lane isolation asks.
    """
    if not isinstance(part, QueueRange):  # Spark's placeholder when the queue set is empty
        return
    mq = part.queue
    consumer = SyncPullConsumer(options.group, options.nameserver, gray=options.gray, lane=options.lane,
                                register=False)
    try:
        lane = options.in_lane if options.in_lane is not None else consumer.route(mq.topic).lane_of(mq)
        adopted = options.in_lane is None and lane is not None  # a base job reading a lane's queue
        spans = receive_spans(options.group, mq, lane or None)
        offset = part.start
        stalled_since: float | None = None
        while offset < part.end:
            if spans is not None:
                spans.pull_started()
            result = consumer.pull(mq, offset, min(options.pull_batch_size, part.end - offset), options.expression,
                                   NO_NEW_MSG_WAIT_S if stalled_since is not None else 0.0, adopted)
            if result.status is PullStatus.OFFSET_ILLEGAL:
                raise OffsetIllegalError(f"{mq}: offset {offset} is outside [{result.min_offset}, "
                                         f"{result.max_offset}) (aged out by retention?)")
            if result.status is PullStatus.NO_NEW_MSG:
                now = time.monotonic()
                stalled_since = stalled_since or now
                if now - stalled_since > STALL_TIMEOUT_S:
                    raise RequestTimeoutError(f"{mq}: offset {offset} of range end {part.end} not readable "
                                              f"after {STALL_TIMEOUT_S:g}s")
                continue
            stalled_since = None
            messages = [m for m in result.messages if m.queue_offset < part.end]
            if spans is not None:
                spans.received(messages)
            if messages:
                yield to_record_batch(messages)
            offset = result.next_begin_offset
    finally:
        consumer.stop()
