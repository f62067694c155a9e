"""One SparkSession (``local[2]``, no UI, 2 shuffle partitions) shared by every Spark test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from graymq.client.spark import register
    from graymq.client.spark.session import local_session

    session = local_session("graymq-spark-tests", master="local[2]",
                            conf={"spark.sql.shuffle.partitions": "2", "spark.sql.session.timeZone": "UTC"})
    register(session)
    try:
        yield session
    finally:
        session.stop()
