"""How many rows a batch write stored, counted on the brokers: what the driver says when the write fails.

The tasks that finish report their counts to the driver, but the failed task's count and those of the tasks
Spark cancels with it never reach the driver (a cancelled task may have stored every row of its partition).
The brokers know: the first record of every send request carries ``PROPERTY_PRODUCER_SEQUENCE``
(``<producer id hex>:<sequence>:<messages>``), and a sink task's producer id is derived from the write id and
its partition (``sink_task.TaskIdentity``). So when the write is planned, ``mark_write`` notes where each queue
of the topic ends (both sides: with the gray switch off a normal write may use any queue); ``count_stored``
reads from there to the end and adds up the messages of the requests sent under the write's producer ids: the
rows this attempt of the write stored (rows a re-run finds stored already are not stored again, so not counted
again). Spark calls the driver's ``abort`` while it is still cancelling the other tasks, which may store a
request or two until their Python workers are killed (within ``spark.python.task.killTimeout``, 2 s by
default): the count goes on until ``SETTLE_S`` pass without a new row of the write.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from graymq.client.consumer.pull_consumer import PullConsumer
from graymq.client.message import MessageQueue, PullStatus
from graymq.client.spark.sink_options import SinkOptions
from graymq.client.spark.sink_task import TaskIdentity
from graymq.client.sync import SyncFacade
from graymq.protocol.constants import PROPERTY_PRODUCER_SEQUENCE
from graymq.protocol.errors import GrayMQError

TALLY_GROUP = "SPARK_SINK_TALLY"  # pulls under it commit nothing and register no client
PULL_BATCH = 1024
SETTLE_S = 2.5  # a little over Spark's default killTimeout
MAX_SETTLES = 5  # other producers of the topic keep its queues growing: stop waiting for ours after this


@dataclass(frozen=True)
class WriteMarks:
    """Where each queue of the write's topic ended before the write sent anything."""

    ends: dict[MessageQueue, int]


def _consumer(options: SinkOptions) -> SyncFacade:
    return SyncFacade(lambda: PullConsumer(TALLY_GROUP, options.nameserver, gray=options.gray, token=options.token,
                                           register=False))


def mark_write(options: SinkOptions) -> WriteMarks | None:
    """The ends of the queues of the topic ``options`` writes to; ``None`` when rows name their own topics (no
    count then)."""
    if options.topic is None:
        return None
    consumer = _consumer(options)
    try:
        route = consumer.route(options.topic)
        return WriteMarks({mq: consumer.max_offset(mq) for mq in route.queues(readable=True)})
    finally:
        consumer.stop()


def request_rows(value: str, producer_ids: set[int]) -> int:
    """The messages of a request whose sequence property is ``value``, if one of ``producer_ids`` sent it.

    >>> request_rows("1f:3:10", {31}), request_rows("1f:3:10", {7}), request_rows("bad", {31})
    (10, 0, 0)
    """
    parts = value.split(":")
    if len(parts) != 3:
        return 0
    try:
        return int(parts[2]) if int(parts[0], 16) in producer_ids else 0
    except ValueError:
        return 0


def count_stored(options: SinkOptions, marks: WriteMarks, write_id: str, partitions: int) -> int:
    """Rows stored since ``marks`` by the ``partitions`` tasks of batch write ``write_id`` (``GrayMQError`` when
    a queue cannot be read to its end)."""
    producer_ids = {TaskIdentity(write_id, 0, p).producer_id for p in range(partitions)}
    consumer = _consumer(options)
    try:
        ends, rows = dict(marks.ends), 0
        for settle in range(MAX_SETTLES + 1):
            if settle:
                time.sleep(SETTLE_S)
            found = 0
            for mq, start in ends.items():
                ends[mq], counted = _count_queue(consumer, mq, start, producer_ids)
                found += counted
            rows += found
            if settle and not found:
                break
        return rows
    finally:
        consumer.stop()


def _count_queue(consumer: SyncFacade, mq: MessageQueue, start: int, producer_ids: set[int]) -> tuple[int, int]:
    """(the queue's end, the write's rows in ``[start, end)``)."""
    rows, offset, end = 0, start, consumer.max_offset(mq)
    while offset < end:
        result = consumer.pull(mq, offset, min(PULL_BATCH, end - offset))
        if result.status is not PullStatus.FOUND:
            raise GrayMQError(f"{mq}: offset {offset} unreadable ({result.status.value}; queue holds "
                              f"[{result.min_offset}, {result.max_offset}))")
        for message in result.messages:
            value = message.properties.get(PROPERTY_PRODUCER_SEQUENCE)
            if value is not None and message.queue_offset < end:
                rows += request_rows(value, producer_ids)
        offset = result.next_begin_offset
    return end, rows


def failed_write_line(options: SinkOptions, marks: WriteMarks | None, write_id: str, messages: list[object]) -> str:
    """The one line a failed batch write prints: the rows it stored and the ``writeId`` a re-run passes."""
    finished = [m for m in messages if m is not None]
    reported = (f"the {len(finished)} of {len(messages)} tasks that finished stored "
                f"{sum(getattr(m, 'rows', 0) for m in finished)} rows, the others an unknown number")
    if marks is None:
        stored = f"{reported} (rows that name their own topic are not counted)"
    else:
        try:
            stored = f"{count_stored(options, marks, write_id, len(messages))} rows stored (counted on the brokers)"
        except (GrayMQError, OSError) as exc:
            stored = f"{reported} (the brokers could not be read: {exc})"
    return (f"graymq write {write_id} failed: {stored}; save() again with the option writeId={write_id} "
            f"(within 5 minutes) to store only the rest")
