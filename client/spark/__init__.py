"""graymq for PySpark: the ``graymq`` data source and streaming jobs that run gray or normal.

Reading::

    from graymq.client.spark import register
    register(spark)
    frame = (spark.readStream.format("graymq")           # or spark.read for a snapshot
             .option("nameserver", "http://ns:9876").option("topic", "ORDERS")
             .option("group", "ORDER_STATS").option("grayFlag", "true").load())

Options are in ``graymq.client.spark.options.SourceOptions`` (nameserver, topic(s), group, grayFlag,
lane, expression, maxRecordsPerTrigger, startingOffsets, pullBatchSize). The side can also come from
the Spark conf ``spark.graymq.grayFlag`` or ``spark.graymq.lane``: ``with_conf_gray_flag(spark, options)`` reads
them on the driver and passes them on as options (``StreamingJob`` does this). Schema: ``schema.SCHEMA``.

Writing (``graymq.client.spark.sink``)::

    (frame.writeStream.format("graymq")                  # or frame.write for a batch
     .option("nameserver", "http://ns:9876").option("topic", "ORDERS_ENRICHED")
     .option("grayFlag", "true").option("checkpointLocation", "/cp").start())

Options in ``SinkOptions``, columns (``body`` required; ``topic``, ``tag``, ``keys``, ``properties``,
``sharding_key``) in ``SinkColumns``, both checked on the driver before a row is sent. A gray
write goes to the gray queues, a normal one to the normal queues; every task is one producer of
``producerGroup`` with an identity derived from (query or write id, batch, partition), so a
repeated task or micro-batch is stored once (``graymq.client.spark.sink_task``).

Queue set: a gray job reads the gray queues of every broker, a job in lane L the queues of L's slot, a normal
job the normal ones and the lanes' its group adopts (every queue while the group's gray switch is off), one input
partition per (broker, queue) — per queue with new offsets in a micro-batch.

Offsets and commits — how drain detection is exact: offsets are kept in the Spark checkpoint
(``{topic: {broker: {queue_id: next offset}}}``), so a restarted query neither skips nor
repeats a committed batch. They are also committed to the brokers under the job's group, from
the stream reader's ``latestOffset(start, …)``: Spark calls it only after the batch ending at
``start`` has been written by the sink and recorded in its commit log, so ``start`` is exactly
what has been processed, whatever the sink. Spark checks once more after the last batch of an
``availableNow`` run, so when such a run returns, its final offsets are on the brokers and the
gray backlog the controller reads is exact. (Spark's ``commit()`` hook arrives one batch late
and never for the last batch; it is not used.) With a long processing-time trigger the
brokers lag by one trigger, never by more. Batch reads commit nothing.

Membership and the drain: ``StreamingJob`` registers the job in the name server (role
``spark``, labels ``app_name``/``app_id``), heartbeats from the driver, and follows the desired
flag — on gray → normal it drains the gray queues with an ``availableNow`` run on the gray
checkpoint, checks the gray backlog, reports normal and restarts as normal on its own
checkpoint. Runbook: ``jobs/README.md``; life cycle: ``graymq.client.spark.job``.
"""

from __future__ import annotations

from graymq.client.spark.job import StreamingJob
from graymq.client.spark.options import GRAY_FLAG_CONF, LANE_CONF, SourceOptions, side_options, with_conf_gray_flag
from graymq.client.spark.sink_options import SinkOptions
from graymq.client.spark.sink_schema import SinkColumns
from graymq.client.spark.source import GraymqDataSource, register

__all__ = ["GRAY_FLAG_CONF", "LANE_CONF", "GraymqDataSource", "SinkColumns", "SinkOptions", "SourceOptions",
           "StreamingJob", "register", "side_options", "with_conf_gray_flag"]
