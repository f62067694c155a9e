"""The ``graymq`` Python data source: batch reads of a snapshot and streaming reads of the job's queue set."""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from graymq.client.spark.options import SourceOptions
from graymq.client.spark.partition import QueueRange, read_range
from graymq.client.spark.planner import Planner
from graymq.client.spark.schema import SCHEMA
from graymq.client.spark.sink import GraymqBatchWriter, GraymqStreamWriter, parse_write
from graymq.client.spark.stream import GraymqStreamReader
from graymq.client.sync import SyncFacade
from graymq.protocol.errors import ConfigError


class GraymqDataSource(DataSource):
    """``spark.read`` / ``spark.readStream`` (options: ``SourceOptions``), ``df.write`` / ``df.writeStream``
    (options: ``SinkOptions``, columns: ``SinkColumns``) ``.format("graymq")``."""

    @classmethod
    def name(cls) -> str:
        return "graymq"

    def schema(self) -> StructType:
        return SCHEMA

    def _options(self, schema: StructType) -> SourceOptions:
        if schema != SCHEMA:
            raise ConfigError(f"the graymq source has a fixed schema; got {schema.simpleString()}")
        return SourceOptions.parse(self.options)

    def reader(self, schema: StructType) -> DataSourceReader:
        return GraymqBatchReader(self._options(schema))

    def streamReader(self, schema: StructType) -> GraymqStreamReader:
        return GraymqStreamReader(self._options(schema))

    def writer(self, schema: StructType, overwrite: bool) -> GraymqBatchWriter:
        return GraymqBatchWriter(*parse_write(self.options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> GraymqStreamWriter:
        return GraymqStreamWriter(*parse_write(self.options, schema))


def register(spark: Any) -> None:
    """Make ``format("graymq")`` available to ``spark.read``/``readStream`` and ``df.write``/``writeStream``."""
    spark.dataSource.register(GraymqDataSource)


class GraymqBatchReader(DataSourceReader):
    """A snapshot: every queue of the job's set from its starting offset to its max offset at planning time.

    One partition per (broker, queue), empty ones included. A batch read commits nothing.
    """

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        planner = SyncFacade(lambda: Planner(self.options))
        try:
            queues = planner.queues()
            start = planner.starting_offsets(queues)
            end = planner.max_offsets(queues)
        finally:
            planner.close()
        return [QueueRange(mq.topic, mq.broker_name, mq.queue_id, start[mq], max(start[mq], end[mq]))
                for mq in queues]

    def read(self, partition: InputPartition) -> Any:
        return read_range(self.options, partition)
