"""A plain PySpark script (no logging set up) whose batch writes fail half way, as a user runs it.

    python -m tests.spark.failed_write_job NAMESERVER TOPIC_REFUSED TOPIC_UDF

Two writes of 200 rows (``r0`` ... ``r199``, two partitions, 10 rows a request), each under its own ``writeId``:

- ``refused``: row 150 is too large for the broker (started with a 1000-byte limit), so partition 1 fails in the
  sink after its first 50 rows;
- ``udf``: the frame's Python UDF raises on row 150, outside the sink, once partition 0's 100 rows are stored.

After each failure it prints ``FAILED <case>: <the error on one line>`` and waits for a line on stdin (the test
counts what is stored meanwhile), then writes the fixed frame under the same ``writeId`` and prints ``DONE <case>``.
"""

from __future__ import annotations

import os
import sys
import time

from pyspark.sql import SparkSession
from pyspark.sql.functions import udf

from graymq.client.spark import register

WRITE_IDS = {"refused": "failed-write-refused", "udf": "failed-write-udf"}


def wait_for_partition_0(nameserver: str, topic: str) -> None:
    """Until queue 0 (partition 0's) holds its 100 rows."""
    from graymq.client.message import MessageQueue
    from graymq.client.sync import SyncPullConsumer

    reader = SyncPullConsumer("FAILED_WRITE_JOB", nameserver, register=False)
    try:
        deadline = time.monotonic() + 60
        while reader.max_offset(MessageQueue(topic, "broker-a", 0)) < 100 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        reader.stop()


def frames(spark, nameserver: str, topic: str, case: str):  # type: ignore[no-untyped-def]
    """(the failing frame, the fixed one) of ``case``."""
    rows = spark.range(0, 200, numPartitions=2)
    fixed = rows.selectExpr("concat('r', id) as body")
    if case == "refused":
        return rows.selectExpr("case when id = 150 then repeat('x', 5000) else concat('r', id) end as body"), fixed

    @udf("string")
    def enrich(n: int) -> str:
        if n == 150:
            wait_for_partition_0(nameserver, topic)
            raise ValueError("enrichment failed on row 150")
        return f"r{n}"

    return rows.select(enrich("id").alias("body")), fixed


def main() -> None:
    nameserver, refused_topic, udf_topic = sys.argv[1:4]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").appName("failed-write")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1").getOrCreate())
    register(spark)
    try:
        for case, topic in (("refused", refused_topic), ("udf", udf_topic)):
            broken, fixed = frames(spark, nameserver, topic, case)
            options = {"nameserver": nameserver, "topic": topic, "batchMaxMessages": "10", "writeId": WRITE_IDS[case]}
            try:
                broken.write.format("graymq").options(**options).mode("append").save()
                print(f"STORED {case}", flush=True)
            except Exception as exc:  # noqa: BLE001 - the user's view of the failure is what the test reads
                print(f"FAILED {case}: {' | '.join(str(exc).split(chr(10)))}", flush=True)
            sys.stdin.readline()
            fixed.write.format("graymq").options(**options).mode("append").save()
            print(f"DONE {case}", flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
