"""Helpers of the sink tests: what a topic holds, read back by stored position with the graymq source."""

from __future__ import annotations

from collections import Counter
from typing import Any


def stored_rows(spark: Any, ns_url: str, topic: str, *, gray: bool) -> list[Any]:
    """Every message in ``topic``'s gray or normal queues (a batch read commits nothing)."""
    options = {"nameserver": ns_url, "topic": topic, "group": "SINK_TEST_READER", "startingOffsets": "earliest",
               "grayFlag": str(gray).lower()}
    return spark.read.format("graymq").options(**options).load().collect()


def bodies(rows: list[Any]) -> Counter[str]:
    """How often each body is stored (positions are distinct by construction: one row per stored message)."""
    assert len({(r.broker, r.queue_id, r.queue_offset) for r in rows}) == len(rows)
    return Counter(bytes(r.body).decode() for r in rows)
