"""A tracer provider for Spark's Python workers in tests, as OpenTelemetry's zero-code instrumentation sets one up
from its ``sitecustomize``: on a worker's ``PYTHONPATH`` with ``GRAYMQ_TEST_SPANS`` naming a file, every span the
worker finishes is appended to that file as one JSON line (``tests/support/spans.py``, ``worker_spans``)."""

from __future__ import annotations

import os

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult


class JsonLinesExporter(SpanExporter):
    """Each span one line of ``path``, appended whole (workers of one daemon share the file)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans):  # type: ignore[no-untyped-def]
        with open(self.path, "a", encoding="utf-8") as out:
            out.write("".join(span.to_json(indent=None) + "\n" for span in spans))
        return SpanExportResult.SUCCESS


if os.environ.get("GRAYMQ_TEST_SPANS"):
    _provider = TracerProvider()
    _provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(os.environ["GRAYMQ_TEST_SPANS"])))
    trace.set_tracer_provider(_provider)
