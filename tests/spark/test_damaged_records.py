"""The Spark source's reader skips a damaged record (logged, counted) instead of failing the task."""

from __future__ import annotations

import asyncio
import logging

import pytest

from graymq.client.spark.options import SourceOptions
from graymq.client.spark.partition import QueueRange, read_range
from tests.support.clients import run_scenario
from tests.support.fake_broker import FakeBroker, record

pytestmark = [pytest.mark.spark, pytest.mark.integration]
TOPIC = "TOPIC_SPARK_DAMAGED"


def test_a_damaged_record_in_a_range_is_skipped_and_the_rest_of_the_range_is_read(cluster, caplog):
    caplog.set_level(logging.ERROR, logger="graymq")
    options = SourceOptions.parse({"nameserver": cluster.ns_url, "topic": TOPIC, "group": "GID_SPARK_DAMAGED",
                                   "pullBatchSize": "4"})

    read: list[int] = []

    async def scenario() -> None:
        broker = FakeBroker("fake-s", TOPIC, queues={0: [record(TOPIC, 0, i, b"x", damaged=i == 5)
                                                          for i in range(12)]})
        await broker.start(cluster.ns_url)
        try:
            part = QueueRange(TOPIC, "fake-s", 0, 2, 12)
            batches = await asyncio.to_thread(lambda: list(read_range(options, part)))
        finally:
            await broker.stop()
        read.extend(row["queue_offset"] for b in batches for row in b.to_pylist())

    run_scenario(scenario, 60)
    assert read == [2, 3, 4, 6, 7, 8, 9, 10, 11]
    (line,) = [r.getMessage() for r in caplog.records if "damaged record" in r.getMessage()]
    assert f"topic {TOPIC} queue 0 on broker fake-s" in line and "queue offset 5:" in line

