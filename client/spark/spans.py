"""The spans of a Spark stage, after OpenTelemetry's messaging semantic conventions (``client/tracing.py`` has the
rest): the source's ``receive TOPIC`` span per pull (kind CONSUMER) linked to each message's trace context, and the
sink's ``send TOPIC`` span per row (kind PRODUCER), the child of the context the row's ``properties`` carry (the
``traceparent`` of the message it was made from, when the job keeps it), whose own context the sent message carries
on. So a message's trace runs A → the stage → B through the stage's send span; each span names the lane
(``graymq.lane``, absent for base).

They run in Spark's Python workers, which trace only when a tracer provider is configured there (the worker's own
OpenTelemetry setup, e.g. zero-code instrumentation's ``sitecustomize`` on the workers' ``PYTHONPATH``); otherwise a
task asks ``tracer()`` once and adds nothing. A replayed sink request carries new span contexts, but the brokers
store only the first attempt's messages, so the stored context is that of the attempt that stored it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from graymq.client import tracing
from graymq.client.message import Message, MessageQueue
from graymq.client.tracing import GRAY, LANE, PRODUCER_GROUP, SYSTEM
from graymq.core.gray_side import Mark, mark_lane
from graymq.protocol.record import MessageExt

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

try:
    from opentelemetry import propagate, trace
    from opentelemetry.trace import Link, SpanKind, Status, StatusCode
except ImportError:  # tracing is off: the API is not installed (``tracer()`` is None then)
    pass


def _lane_attributes(lane: str | None) -> dict[str, Any]:
    return {GRAY: lane is not None, **({LANE: lane} if lane is not None else {})}


class ReceiveSpans:
    """A ``receive`` span per pull of one source task; ``pull_started`` before the pull, ``received`` after it."""

    def __init__(self, graymq_tracer: Tracer, group: str, mq: MessageQueue, lane: str | None) -> None:
        self.tracer = graymq_tracer
        self.started_ns = 0
        self.attributes: dict[str, Any] = {
            "messaging.system": SYSTEM, "messaging.operation.type": "receive", "messaging.operation.name": "receive",
            "messaging.destination.name": mq.topic, "messaging.consumer.group.name": group,
            "messaging.destination.partition.id": f"{mq.broker_name}:{mq.queue_id}", **_lane_attributes(lane)}

    def pull_started(self) -> None:
        self.started_ns = time.time_ns()

    def received(self, messages: Sequence[MessageExt]) -> None:
        """The span of the pull that returned ``messages`` (none: no span), linked to each one's context."""
        if not messages:
            return
        links = [Link(context) for m in messages
                 if (context := trace.get_current_span(propagate.extract(m.properties)).get_span_context()).is_valid]
        span = self.tracer.start_span(f"receive {messages[0].topic}", kind=SpanKind.CONSUMER, links=links,
                                      start_time=self.started_ns or None, attributes={
                                          **self.attributes, "messaging.batch.message_count": len(messages)})
        span.end()


def receive_spans(group: str, mq: MessageQueue, lane: str | None) -> ReceiveSpans | None:
    """The receive spans of a task reading ``mq`` for ``group`` (``lane``: the queue's lane, None base), or None
    while tracing is off."""
    graymq_tracer = tracing.tracer()
    return None if graymq_tracer is None else ReceiveSpans(graymq_tracer, group, mq, lane)


class SendSpans:
    """The ``send`` spans of one sink task's rows: ``started`` opens a row's span and gives the message to send in
    its place (its properties carry the span's context); ``stored`` or ``failed`` end the spans of a request."""

    def __init__(self, graymq_tracer: Tracer, producer_group: str, client_id: str, side: Mark) -> None:
        self.tracer = graymq_tracer
        self.attributes: dict[str, Any] = {
            "messaging.system": SYSTEM, "messaging.operation.type": "send", "messaging.operation.name": "send",
            "messaging.client.id": client_id, PRODUCER_GROUP: producer_group, **_lane_attributes(mark_lane(side))}

    def started(self, message: Message) -> tuple[Span, Message]:
        incoming = propagate.extract(message.properties)
        attributes = {**self.attributes, "messaging.destination.name": message.topic}
        if message.tags:
            attributes["rocketmq.message.tag"] = message.tags
        span = self.tracer.start_span(f"send {message.topic}", context=incoming, kind=SpanKind.PRODUCER,
                                      attributes=attributes)
        properties = dict(message.properties)
        propagate.inject(properties, context=trace.set_span_in_context(span, incoming))
        return span, dataclasses.replace(message, properties=properties)

    @staticmethod
    def stored(spans: Sequence[Span], mq: MessageQueue, msg_ids: Sequence[str]) -> None:
        """End the spans of a request ``mq`` answered (none while tracing is off)."""
        if not spans:
            return
        for span, msg_id in zip(spans, msg_ids, strict=True):
            span.set_attributes({"messaging.message.id": msg_id,
                                 "messaging.destination.partition.id": f"{mq.broker_name}:{mq.queue_id}"})
            span.end()

    @staticmethod
    def failed(spans: Sequence[Span], error: BaseException) -> None:
        """End the spans of rows whose request failed or was never sent."""
        for span in spans:
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, "send failed"))
            span.end()


def send_spans(producer_group: str, client_id: str, side: Mark) -> SendSpans | None:
    """The send spans of a sink task writing in ``producer_group`` on ``side``, or None while tracing is off."""
    graymq_tracer = tracing.tracer()
    return None if graymq_tracer is None else SendSpans(graymq_tracer, producer_group, client_id, side)
