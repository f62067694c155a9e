"""The row schema of the ``graymq`` source and the Arrow batches its executors hand to Spark.

Rows are built column-wise as ``pyarrow.RecordBatch`` (one per pull) rather than as Python
tuples: Spark then skips its per-row conversion.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

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

from graymq.protocol.record import MessageExt

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
    plain = [
        [m.topic for m in messages],
        [m.broker_name for m in messages],
        [m.queue_id for m in messages],
        [m.queue_offset for m in messages],
        [m.msg_id for m in messages],
        [m.tags for m in messages],
    ]
    arrays = [pa.array(column, type=field.type) for column, field in zip(plain, ARROW_SCHEMA, strict=False)]
    key_offsets, keys = _flatten(m.keys for m in messages)
    arrays.append(pa.ListArray.from_arrays(key_offsets, pa.array(keys, pa.string()), type=_type("keys")))
    arrays.append(pa.array([m.body for m in messages], type=pa.binary()))
    property_offsets, names = _flatten(m.properties for m in messages)
    values = [value for m in messages for value in m.properties.values()]
    arrays.append(pa.MapArray.from_arrays(property_offsets, pa.array(names, pa.string()), pa.array(values, pa.string()),
                                          type=_type("properties")))
    arrays += [
        pa.array([m.born_timestamp * 1000 for m in messages], type=_type("born_timestamp")),
        pa.array([m.store_timestamp * 1000 for m in messages], type=_type("store_timestamp")),
        pa.array([m.gray for m in messages], type=pa.bool_()),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


def _type(name: str) -> pa.DataType:
    return ARROW_SCHEMA.field(name).type


def _flatten(items: Iterable[Iterable[str]]) -> tuple[pa.Array, list[str]]:
    """Offsets and flat values of a list column: Arrow builds it far faster than from nested lists."""
    offsets = [0]
    flat: list[str] = []
    for item in items:
        flat.extend(item)
        offsets.append(len(flat))
    return pa.array(offsets, pa.int32()), flat
