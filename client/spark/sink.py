"""The ``graymq`` sink's writers: ``df.write.format("graymq")`` and ``df.writeStream.format("graymq")``.

The options (``SinkOptions``) and the columns (``SinkColumns``) are checked on the driver when the
write is planned, before any row is sent. Each task writes its partition with one producer
(``sink_task.PartitionWriter``) under a deterministic identity, so that a repeated attempt is
stored once; the driver-side ``commit`` adds up what the tasks stored, and a failed batch write's ``abort``
counts what it stored on the brokers (``sink_tally``).
"""

from __future__ import annotations

import logging
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage

from graymq.client.spark.sink_options import SinkOptions
from graymq.client.spark.sink_schema import SinkColumns
from graymq.client.spark.sink_tally import failed_write_line, mark_write
from graymq.client.spark.sink_task import PartitionWriter, TaskIdentity
from graymq.protocol.errors import ConfigError

log = logging.getLogger(__name__)
# Local properties Spark sets on the tasks of a micro-batch: the query's id (kept in its checkpoint, so the
# same after a restart) and the batch id.
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


@dataclass(frozen=True)
class SinkCommit(WriterCommitMessage):
    """What one task stored."""

    partition_id: int
    rows: int


def _task() -> TaskContext:
    context = TaskContext.get()
    if context is None:
        raise ConfigError("graymq sink: write() runs in a Spark task only")
    return context


def _stored(messages: list[Any]) -> int:
    return sum(m.rows for m in messages if isinstance(m, SinkCommit))


class GraymqBatchWriter(DataSourceWriter):
    """A batch write: every task is identified by the write's id (``writeId``, else a new one) and its partition."""

    def __init__(self, options: SinkOptions, columns: SinkColumns) -> None:
        self.options = options
        self.columns = columns
        self.write_id = options.write_id or uuid.uuid4().hex
        self.marks = mark_write(options)  # before any task sends: where the count of a failed write starts

    def write(self, iterator: Iterator[Any]) -> SinkCommit:
        partition = _task().partitionId()
        identity = TaskIdentity(self.write_id, 0, partition)
        return SinkCommit(partition, PartitionWriter(self.options, self.columns, identity).write(iterator))

    def commit(self, messages: list[Any]) -> None:
        log.info("graymq write %s: %d rows stored", self.write_id, _stored(messages))

    def abort(self, messages: list[Any]) -> None:
        """Say on stderr how many rows the write stored, counted on the brokers (the tasks Spark cancelled and the
        failed one report nothing), and the ``writeId`` to save again with.

        Printed rather than logged: ``abort`` runs in a Python worker of its own, whose logging nobody configured;
        its stderr reaches the terminal of the job (and the driver's log). The line and its newline go in one write:
        the JVM logs to the same stderr, and ``print`` writes them apart, so a log line could land between them.
        """
        sys.stderr.write(failed_write_line(self.options, self.marks, self.write_id, messages) + "\n")
        sys.stderr.flush()


class GraymqStreamWriter(DataSourceStreamWriter):
    """A micro-batch: every task is identified by the query's id, the batch id and its partition."""

    def __init__(self, options: SinkOptions, columns: SinkColumns) -> None:
        self.options = options
        self.columns = columns

    def write(self, iterator: Iterator[Any]) -> SinkCommit:
        context = _task()
        query_id = context.getLocalProperty(QUERY_ID_PROPERTY)
        batch_id = context.getLocalProperty(BATCH_ID_PROPERTY)
        if query_id is None or batch_id is None:
            raise ConfigError("graymq sink: the task carries no streaming query id or batch id")
        identity = TaskIdentity(query_id, int(batch_id), context.partitionId())
        return SinkCommit(identity.partition_id, PartitionWriter(self.options, self.columns, identity).write(iterator))

    def commit(self, messages: list[Any], batchId: int) -> None:  # noqa: N803 - Spark's name
        log.debug("graymq sink: batch %d stored %d rows", batchId, _stored(messages))

    def abort(self, messages: list[Any], batchId: int) -> None:  # noqa: N803 - Spark's name
        log.warning("graymq sink: batch %d failed after %d rows stored; its re-run stores only the rest",
                    batchId, _stored(messages))


def parse_write(options: dict[str, str], schema: Any) -> tuple[SinkOptions, SinkColumns]:
    """The checked options and columns of a write (``ConfigError`` naming what is wrong)."""
    parsed = SinkOptions.parse(options)
    return parsed, SinkColumns.check(schema, parsed.topic)
