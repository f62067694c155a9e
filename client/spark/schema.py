"""The row schema of the ``graymq`` source and the Arrow batches its executors hand to Spark.

Rows are built column-wise as ``pyarrow.RecordBatch`` (one per pull) rather than as Python
tuples: Spark then skips its per-row conversion.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from protocol.record import MessageExt

SCHEMA = StructType([
    StructField("topic", StringType(), False),
    StructField("broker", StringType(), False),
    StructField("queue_id", IntegerType(), False),
    StructField("queue_offset", LongType(), False),
    StructField("msg_id", StringType(), False),
    StructField("tags", StringType(), False),
    StructField("keys", ArrayType(StringType(), False), False),
    StructField("body", BinaryType(), False),
    StructField("properties", MapType(StringType(), StringType(), False), False),
    StructField("born_timestamp", TimestampType(), False),
    StructField("store_timestamp", TimestampType(), False),
    StructField("gray", BooleanType(), False),
])
# Spark checks a returned batch against exactly this Arrow schema (timestamps in UTC microseconds).
ARROW_SCHEMA = to_arrow_schema(SCHEMA, timezone="UTC")


def to_record_batch(messages: Sequence[MessageExt]) -> pa.RecordBatch:
    """One Arrow batch of ``messages`` in ``SCHEMA`` order."""
    columns = [
        [m.topic for m in messages],
        [m.broker_name for m in messages],
        [m.queue_id for m in messages],
        [m.queue_offset for m in messages],
        [m.msg_id for m in messages],
        [m.tags for m in messages],
        [m.keys for m in messages],
        [m.body for m in messages],
        [list(m.properties.items()) for m in messages],
        [m.born_timestamp * 1000 for m in messages],
        [m.store_timestamp * 1000 for m in messages],
        [m.gray for m in messages],
    ]
    arrays = [pa.array(column, type=field.type) for column, field in zip(columns, ARROW_SCHEMA, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
