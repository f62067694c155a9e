"""Order events → per-minute order counts and amounts, one Parquet directory per micro-batch.

An order event is a graymq message whose body is JSON ``{"order_id": str, "amount": number,
"status": str}``; its minute is the producer's timestamp (``born_timestamp``) truncated.
Each micro-batch writes partial aggregates to ``<output>/side=<gray|normal>/batch=<id>``,
overwriting on a replay, so a batch re-run after a failure never counts twice; ``minute_totals``
adds the partials up. Bodies that are not such JSON are kept, not dropped, under
``<output>/rejected/side=…/batch=…`` with their message ids.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, StringType, StructField, StructType

ORDER_SCHEMA = StructType([
    StructField("order_id", StringType()),
    StructField("amount", DoubleType()),
    StructField("status", StringType()),
])


def parse_orders(messages: DataFrame) -> DataFrame:
    """graymq rows → (msg_id, minute, order_id, amount, status, valid)."""
    order = F.from_json(F.col("body").cast("string"), ORDER_SCHEMA)
    return messages.select(
        "msg_id", F.date_trunc("minute", "born_timestamp").alias("minute"), order.alias("order"),
    ).select(
        "msg_id", "minute", "order.order_id", "order.amount", "order.status",
        (F.col("order.order_id").isNotNull() & F.col("order.amount").isNotNull()).alias("valid"),
    )


def minute_stats(orders: DataFrame) -> DataFrame:
    """Per minute and status: orders, amount sum, smallest and largest amount."""
    return orders.where("valid").groupBy("minute", "status").agg(
        F.count("*").alias("orders"), F.sum("amount").alias("amount"),
        F.min("amount").alias("min_amount"), F.max("amount").alias("max_amount"),
    )


def write_batch(messages: DataFrame, batch_id: int, output: str, side: str) -> None:
    """The ``foreachBatch`` sink: this batch's partial aggregates (and rejects) under its batch id."""
    orders = parse_orders(messages).cache()
    try:
        target = f"side={side}/batch={batch_id:010d}"
        minute_stats(orders).write.mode("overwrite").parquet(f"{output}/stats/{target}")
        rejected = orders.where("not valid").select("msg_id")
        if not rejected.isEmpty():
            rejected.write.mode("overwrite").parquet(f"{output}/rejected/{target}")
    finally:
        orders.unpersist()


def minute_totals(spark: SparkSession, output: str) -> DataFrame:
    """The final figures: partials of every batch of both sides added up per minute and status."""
    partials = spark.read.parquet(f"{output}/stats")
    return partials.groupBy("minute", "status").agg(
        F.sum("orders").alias("orders"), F.sum("amount").alias("amount"),
        F.min("min_amount").alias("min_amount"), F.max("max_amount").alias("max_amount"),
    ).orderBy("minute", "status")


def pipeline(output: str) -> Any:
    """The ``StreamingJob`` pipeline: the source frame → a ``foreachBatch`` writer per side."""

    def build(frame: DataFrame, gray: bool) -> Any:
        side = "gray" if gray else "normal"
        return frame.writeStream.queryName(f"order-minute-stats-{side}").foreachBatch(
            lambda batch, batch_id: write_batch(batch, batch_id, output, side))

    return build
