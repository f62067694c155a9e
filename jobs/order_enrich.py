"""Order events (ORDERS) → enriched order events (ORDERS_ENRICHED): a streaming stage from graymq to graymq.

    python -m jobs.order_enrich --nameserver URL --checkpoint DIR [--topic ORDERS] [--target ORDERS_ENRICHED] \\
        [--group ORDER_ENRICH] [--producer-group ORDER_ENRICH] [--gray | --normal | --lane NAME] [--trigger-seconds 2]

Each order ``{"order_id", "amount", "status"}`` leaves with a ``band`` (``small`` below 100, else
``large``), tagged with its status, keyed and sharded by its order id (one order's events stay in
order) and carrying the source message id as the property ``source_msg_id``. A body that is not
such JSON is passed on unchanged, tagged ``INVALID``. The stage runs as a ``StreamingJob``: gray it
reads ORDERS' gray queues and writes ORDERS_ENRICHED's gray queues (in lane L, L's slots: docs/lanes.md), normal the
normal ones, and the sink stores each row once however often a task or micro-batch is repeated.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from graymq.client.spark import StreamingJob
from graymq.client.spark.options import side_options
from graymq.client.spark.session import local_session
from jobs.order_stats import ORDER_SCHEMA

LARGE_AMOUNT = 100.0


def enrich(messages: DataFrame) -> DataFrame:
    """graymq rows of ORDERS → the sink's columns (body, tag, keys, properties, sharding_key)."""
    order = F.from_json(F.col("body").cast("string"), ORDER_SCHEMA)
    parsed = messages.select("msg_id", "body", order.alias("order"))
    valid = F.col("order.order_id").isNotNull() & F.col("order.amount").isNotNull()
    band = F.when(F.col("order.amount") >= LARGE_AMOUNT, "large").otherwise("small")
    enriched = F.to_json(F.struct("order.order_id", "order.amount", "order.status", band.alias("band")))
    return parsed.select(
        F.when(valid, enriched.cast("binary")).otherwise(F.col("body")).alias("body"),
        F.when(valid, F.coalesce(F.col("order.status"), F.lit(""))).otherwise(F.lit("INVALID")).alias("tag"),
        F.when(valid, F.array(F.col("order.order_id"))).otherwise(F.array().cast("array<string>")).alias("keys"),
        F.create_map(F.lit("source_msg_id"), F.col("msg_id")).alias("properties"),
        F.when(valid, F.col("order.order_id")).alias("sharding_key"),
    )


def pipeline(nameserver: str, target: str, producer_group: str) -> Any:
    """The ``StreamingJob`` pipeline: the source frame → ``enrich`` → the graymq sink on the job's side."""

    def build(frame: DataFrame, side: bool | str) -> Any:
        return enrich(frame).writeStream.format("graymq").options(
            nameserver=nameserver, topic=target, producerGroup=producer_group, **side_options(side))

    return build


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="order_enrich", description=__doc__.splitlines()[0])
    parser.add_argument("--nameserver", required=True)
    parser.add_argument("--checkpoint", required=True, help="checkpoint root (normal/, gray/, v3/ ... under it)")
    parser.add_argument("--topic", default="ORDERS")
    parser.add_argument("--target", default="ORDERS_ENRICHED")
    parser.add_argument("--group", default="ORDER_ENRICH", help="the stage's consumer group")
    parser.add_argument("--producer-group", default="ORDER_ENRICH", help="the group its writes report as")
    side = parser.add_mutually_exclusive_group()
    side.add_argument("--gray", dest="gray", action="store_const", const="true")
    side.add_argument("--normal", dest="gray", action="store_const", const="false")
    side.add_argument("--lane", metavar="NAME", help="run in lane NAME (docs/lanes.md); --gray is --lane gray")
    parser.add_argument("--trigger-seconds", type=float, default=2.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    options = {"nameserver": args.nameserver, "topic": args.topic, "group": args.group}
    if args.gray is not None:
        options["grayFlag"] = args.gray
    if args.lane is not None:
        options["lane"] = args.lane
    spark = local_session("order-enrich", master="local[2]")
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    try:
        StreamingJob(spark, options, pipeline(args.nameserver, args.target, args.producer_group), args.checkpoint,
                     trigger={"processingTime": f"{args.trigger_seconds:g} seconds"},
                     producer_group=args.producer_group).run(stop)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
