"""Producer and consumer spans: off without a tracer provider, parent/child through the message's properties."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from graymq.client import tracing
from graymq.protocol.record import SYS_FLAG_GRAY, MessageExt


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    """A tracer provider of the test's own (the process-wide one stays unset for the other tests)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(tracing, "tracer", lambda: provider.get_tracer("graymq.client"))
    return exporter


def delivered(properties: dict[str, str], gray: bool = True) -> MessageExt:
    return MessageExt("ORDERS", b"x", 3, 41, 1000, properties=properties, sys_flag=SYS_FLAG_GRAY if gray else 0,
                      broker_name="broker-a", reconsume_times=1)


def test_without_a_configured_provider_nothing_is_traced_and_no_property_added() -> None:
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)  # nobody configured one
    assert tracing.tracer() is None
    properties = {"a": "1"}
    with tracing.send_span("ORDERS", "GID", "c1", True, properties) as sending:
        assert sending.properties is properties and sending.span is None
        sending.stored("ID", "broker-a", 0)
    with tracing.process_spans("GID", [delivered({})]) as processing:
        processing.finished(False)
    assert processing.spans == []  # nothing started


def test_a_send_is_a_producer_span_whose_context_rides_in_the_properties(spans: InMemorySpanExporter) -> None:
    app_tracer = tracing.tracer()
    assert app_tracer is not None
    with app_tracer.start_as_current_span("POST /orders") as request, \
            tracing.send_span("ORDERS", "GID", "c1", True, {"a": "1"}, tags="created") as sending:  # in a request
        sending.stored("MSGID", "broker-a", 2)
    send, _request = spans.get_finished_spans()
    assert send.name == "send ORDERS" and send.kind == SpanKind.PRODUCER
    assert send.parent.span_id == request.get_span_context().span_id
    assert dict(send.attributes) == {
        "messaging.system": "graymq", "messaging.operation.type": "send", "messaging.operation.name": "send",
        "messaging.destination.name": "ORDERS", "messaging.client.id": "c1", "graymq.producer_group": "GID",
        "graymq.gray": True, "graymq.lane": "gray", "rocketmq.message.tag": "created", "messaging.message.id": "MSGID",
        "messaging.destination.partition.id": "broker-a:2"}
    trace_id, span_id = f"{send.context.trace_id:032x}", f"{send.context.span_id:016x}"
    assert sending.properties["a"] == "1" and sending.properties["traceparent"].startswith(f"00-{trace_id}-{span_id}-")


def test_a_failed_send_records_the_error(spans: InMemorySpanExporter) -> None:
    with pytest.raises(TimeoutError), tracing.send_span("ORDERS", "GID", "c1", False, {}):
        raise TimeoutError("no broker answered")
    (send,) = spans.get_finished_spans()
    assert send.status.status_code == StatusCode.ERROR and send.events[0].name == "exception"


def test_each_delivered_message_is_a_consumer_span_child_of_its_send(spans: InMemorySpanExporter) -> None:
    with tracing.send_span("ORDERS", "GID", "c1", True, {}) as first, \
            tracing.send_span("ORDERS", "GID", "c1", False, {}) as second:
        pass
    messages = [delivered(first.properties), delivered(second.properties, gray=False)]
    with tracing.process_spans("GID_ORDER", messages) as processing:
        with tracing.send_span("RELAYED", "GID2", "c2", True, {}):  # a send from the listener
            pass
        processing.finished(False)
    by_name: dict[str, list] = {}
    for span in spans.get_finished_spans():
        by_name.setdefault(span.name, []).append(span)
    (send_first, send_second), (relay,) = by_name["send ORDERS"], by_name["send RELAYED"]
    process_first, process_second = by_name["process ORDERS"]
    sends = {s.context.span_id: s for s in (send_first, send_second)}
    for process in (process_first, process_second):
        parent = sends[process.parent.span_id]
        assert process.kind == SpanKind.CONSUMER and process.context.trace_id == parent.context.trace_id
        assert process.attributes["graymq.gray"] == parent.attributes["graymq.gray"]
        assert process.attributes.get("graymq.lane") == parent.attributes.get("graymq.lane")
        assert process.attributes["messaging.consumer.group.name"] == "GID_ORDER"
        assert process.attributes["messaging.batch.message_count"] == 2
        assert process.attributes["messaging.destination.partition.id"] == "broker-a:3"
        assert process.status.status_code == StatusCode.ERROR
    assert relay.parent.span_id == process_first.context.span_id  # the first message's span is current


def test_the_lane_is_an_attribute_of_send_and_process_spans_and_absent_for_base(spans: InMemorySpanExporter) -> None:
    for side in ("v3", True, False, None):
        with tracing.send_span("ORDERS", "GID", "c1", side, {}):
            pass
    with tracing.process_spans("GID", [delivered({})], "v3"), tracing.process_spans("GID", [delivered({})]), \
            tracing.process_spans("GID", [delivered({}, gray=False)]):
        pass
    lanes = [(s.name.split()[0], s.attributes["graymq.gray"], s.attributes.get("graymq.lane"))
             for s in spans.get_finished_spans()]
    assert lanes == [("send", True, "v3"), ("send", True, "gray"), ("send", False, None), ("send", False, None),
                     ("process", False, None), ("process", True, "gray"), ("process", True, "v3")]
