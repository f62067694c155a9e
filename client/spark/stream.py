"""The streaming reader: micro-batches of queue offset ranges, ``maxRecordsPerTrigger``, ``availableNow``.

Offsets live in Spark's checkpoint (``graymq.client.spark.offsets`` JSON), so a restarted query
resumes exactly where its last committed batch ended. They are also committed to the brokers
under the job's group, from ``latestOffset``: Spark (with its default, synchronous progress
tracking) asks for the latest offset only after the batch ending at ``start`` has been written by
the sink and recorded in the commit log, so
``start`` is exactly what the job has processed. That includes the end of the last batch of an
``availableNow`` run, which Spark checks once more before it stops — so when such a run
returns, the brokers already hold its final offsets (Spark's own ``commit()`` arrives one batch
late and never for the last batch, so it is not used). A ``StreamingJob`` commits the end of the last batch of a
query it stops from its progress, since no next batch will.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from graymq.client.spark.offsets import QueueOffsets, cap_offsets, from_json, to_json
from graymq.client.spark.options import SourceOptions
from graymq.client.spark.partition import QueueRange, read_range
from graymq.client.spark.planner import Planner
from graymq.client.sync import SyncFacade


class GraymqStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._planner: Any = None  # SyncFacade over a Planner, made on first use (the reader is pickled first)
        self._target: QueueOffsets | None = None
        self._committed: QueueOffsets = {}

    @property
    def planner(self) -> Any:
        if self._planner is None:
            self._planner = SyncFacade(lambda: Planner(self.options))
        return self._planner

    def initialOffset(self) -> dict[str, Any]:
        return to_json(self.planner.starting_offsets(self.planner.queues()))

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_records_per_trigger
        return ReadMaxRows(limit) if limit else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.planner.max_offsets(self.planner.queues())

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        done = from_json(start)
        self._commit(done)
        queues = self.planner.queues()
        latest = self.planner.latest_offsets({mq: done[mq] for mq in queues if mq in done})
        if self._target is not None:
            latest = {mq: min(offset, self._target.get(mq, done[mq])) for mq, offset in latest.items()}
        latest = {mq: max(offset, done[mq]) for mq, offset in latest.items()}
        end = cap_offsets(done, latest, limit.max_rows) if isinstance(limit, ReadMaxRows) else latest
        # a queue new to the set enters at its starting offset with nothing read in this batch
        new = [mq for mq in queues if mq not in done]
        if new:
            end.update(self.planner.starting_offsets(new))
        return to_json(end)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        """One partition per queue with new offsets in ``(start, end]``."""
        begin = from_json(start)
        return [
            QueueRange(mq.topic, mq.broker_name, mq.queue_id, begin.get(mq, offset), offset)
            for mq, offset in sorted(from_json(end).items())
            if begin.get(mq, offset) < offset
        ]

    def read(self, partition: InputPartition) -> Any:
        return read_range(self.options, partition)

    def stop(self) -> None:
        if self._planner is not None:
            self._planner.close()
            self._planner = None

    def _commit(self, done: QueueOffsets) -> None:
        changed = {mq: offset for mq, offset in done.items() if self._committed.get(mq) != offset}
        if changed:
            self._committed.update(self.planner.commit(changed))
