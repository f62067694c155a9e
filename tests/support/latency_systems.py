"""Systems for ``graymq.bench.latency.measure`` that fail on purpose (tests/unit/test_bench_latency.py): their
consumer raises, or its process dies, before it says it is subscribed."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any


async def latency_consume(params: dict[str, Any], recorder: Any, ready: Callable[[], None]) -> None:
    if params["fail"] == "raise":
        raise ConnectionRefusedError("name server refused the consumer")
    os._exit(3)  # the process dies without a word


async def latency_produce(params: dict[str, Any], rate: float, count: int) -> int:
    raise AssertionError("the producer must not start before the consumer is ready")
