"""Spans graymq's clients finish, kept in memory by a tracer provider of the test's own."""

from __future__ import annotations

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
