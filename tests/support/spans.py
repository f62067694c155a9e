"""Spans graymq's clients finish, kept in memory by a tracer provider of the test's own; those of Spark's Python
workers, in a file."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from graymq.client import producer as producer_module
from graymq.client import tracing


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    """A tracer provider of the test's own, seen by the producer's and the tracing module's checks alike."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    graymq_tracer = provider.get_tracer("graymq.client")
    monkeypatch.setattr(tracing, "tracer", lambda: graymq_tracer)
    monkeypatch.setattr(producer_module, "tracer", lambda: graymq_tracer)
    return exporter


WORKER_TRACING = Path(__file__).parent / "worker_tracing"


@pytest.fixture
def worker_spans(spark: Any, tmp_path: Path) -> Iterator[Callable[[], list[dict[str, Any]]]]:
    """Spark's Python workers trace into a file of the test's own while it runs (``worker_tracing``): the data
    source is registered again with the workers' environment naming it (new workers, from a daemon of their own);
    the function reads the spans they finished, as JSON. Afterwards the data source is registered as before."""
    from graymq.client.spark import register

    path = tmp_path / "worker-spans.jsonl"
    environment = spark.sparkContext.environment
    environment.update({"PYTHONPATH": str(WORKER_TRACING), "GRAYMQ_TEST_SPANS": str(path)})
    register(spark)

    def finished() -> list[dict[str, Any]]:
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    try:
        yield finished
    finally:
        for name in ("PYTHONPATH", "GRAYMQ_TEST_SPANS"):
            environment.pop(name, None)
        register(spark)
