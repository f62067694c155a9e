"""OpenTelemetry spans for sends and deliveries, after OpenTelemetry's messaging semantic conventions.

A producer span per send (``send TOPIC``, kind PRODUCER) and a consumer span per delivered message (``process
TOPIC``, kind CONSUMER, the child of the span that sent it), each with the gray side as ``graymq.gray`` and the
lane as ``graymq.lane`` (its name, ``gray`` included; absent for base, docs/lanes.md). The
context travels in the message's properties as W3C ``traceparent`` (and ``tracestate``), through the broker, retries
and dead letters alike, so one trace runs from the request that sent a message to the listener that handled it.

graymq uses only the OpenTelemetry API, and only when it is installed and an application configured a tracer
provider (the SDK and its exporter are the application's choice): otherwise every hook is one check of a module
global and a ``yield``, and no property is added (``bench/tracing_cost.py`` measures it).
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

from graymq.core.gray_side import Mark, mark_lane
from graymq.core.queue_layout import GRAY_LANE
from graymq.protocol.record import MessageExt

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider

try:
    from opentelemetry import propagate, trace
    from opentelemetry.trace import ProxyTracerProvider, SpanKind, Status, StatusCode
except ImportError:  # tracing is off: the API is not installed
    trace = None  # type: ignore[assignment]

SYSTEM = "graymq"
# graymq's own attributes: the side, its lane, the producer group, how often a message came again
GRAY = "graymq.gray"
LANE = "graymq.lane"
PRODUCER_GROUP = "graymq.producer_group"
RECONSUME_TIMES = "graymq.reconsume_times"
_UNCONFIGURED = () if trace is None else (ProxyTracerProvider, trace.NoOpTracerProvider)
_UNKNOWN = object()  # an API version without the module global: ask get_tracer_provider() each time
_PROVIDER_FROM_ENV = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ


def tracer() -> Tracer | None:
    """graymq's tracer, or None while no tracer provider is configured (or the API is not installed).

    Checked on every send and delivery, so without a provider it reads the API's module global instead of calling
    ``get_tracer_provider()``, which looks the environment up each time (a provider named by
    ``OTEL_PYTHON_TRACER_PROVIDER`` when this module was imported is asked for as usual)."""
    if trace is None:
        return None
    if getattr(trace, "_TRACER_PROVIDER", _UNKNOWN) is None and not _PROVIDER_FROM_ENV:
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, _UNCONFIGURED):
        return None
    return _tracer_of(provider)


@functools.lru_cache(maxsize=4)
def _tracer_of(provider: TracerProvider) -> Tracer:
    try:
        version = importlib.metadata.version("graymq")
    except importlib.metadata.PackageNotFoundError:
        version = ""
    return provider.get_tracer("graymq.client", version)


class SendSpan:
    """What a send learns about its span: the properties to send (``traceparent`` added) and, once stored, the
    message id and queue. Untraced (no span) it is its own, empty, context manager."""

    __slots__ = ("properties", "span")

    def __init__(self, span: Span | None, properties: dict[str, str]) -> None:
        self.span = span
        self.properties = properties

    def __enter__(self) -> SendSpan:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def stored(self, msg_id: str, broker_name: str, queue_id: int) -> None:
        if self.span is not None:
            self.span.set_attributes({"messaging.message.id": msg_id, "messaging.destination.partition.id":
                                      f"{broker_name}:{queue_id}"})


def send_span(topic: str, producer_group: str, client_id: str, side: Mark, properties: dict[str, str], *,
              tags: str = "", batch_size: int = 1) -> AbstractContextManager[SendSpan]:
    """A producer span around one send (its retries included) when tracing is on; the ``SendSpan``'s properties
    are ``properties`` with the span's context added, to send in their place. Off, ``properties`` unchanged.
    ``side``: the side the send takes (``core.gray_side.Mark``: False base, True the ``gray`` lane, or a lane)."""
    graymq_tracer = tracer()
    if graymq_tracer is None:
        return SendSpan(None, properties)
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM, "messaging.operation.type": "send", "messaging.operation.name": "send",
        "messaging.destination.name": topic, "messaging.client.id": client_id, PRODUCER_GROUP: producer_group,
        GRAY: bool(side),
    }
    lane = mark_lane(side)
    if lane is not None:
        attributes[LANE] = lane
    if tags:
        attributes["rocketmq.message.tag"] = tags
    if batch_size != 1:
        attributes["messaging.batch.message_count"] = batch_size
    return _traced_send(graymq_tracer, topic, attributes, properties)


@contextmanager
def _traced_send(graymq_tracer: Tracer, topic: str, attributes: dict[str, Any],
                 properties: dict[str, str]) -> Iterator[SendSpan]:
    with graymq_tracer.start_as_current_span(f"send {topic}", kind=SpanKind.PRODUCER, attributes=attributes) as span:
        carrier = dict(properties)
        propagate.inject(carrier)
        yield SendSpan(span, carrier)


class Processing:
    """The consumer spans of one listener call; ``finished`` records its outcome on each. Untraced (no spans) it
    is its own, empty, context manager."""

    __slots__ = ("spans",)

    def __init__(self, spans: list[Span]) -> None:
        self.spans = spans

    def __enter__(self) -> Processing:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def finished(self, ok: bool, error: BaseException | None = None) -> None:
        for span in self.spans:
            if error is not None:
                span.record_exception(error)
            if not ok:
                span.set_status(Status(StatusCode.ERROR, "listener failed" if error else "reconsume later"))


_UNTRACED = Processing([])


def process_spans(group: str, messages: Sequence[MessageExt], lane: str | None = None
                  ) -> AbstractContextManager[Processing]:
    """A consumer span per message of one listener call when tracing is on, each the child of the context its
    message carries; the first is the current span while the listener runs (a send from the listener is its
    child). ``lane``: the lane of the queue the messages came from (a gray message of a queue whose lane is not
    known is the ``gray`` lane's, as ``client.context`` reads it)."""
    graymq_tracer = tracer()
    if graymq_tracer is None:
        return _UNTRACED
    return _traced_processing([_process_span(graymq_tracer, group, m, len(messages), lane) for m in messages])


@contextmanager
def _traced_processing(spans: list[Span]) -> Iterator[Processing]:
    try:
        with trace.use_span(spans[0], end_on_exit=False):
            yield Processing(spans)
    finally:
        for span in spans:
            span.end()


def _process_span(graymq_tracer: Tracer, group: str, message: MessageExt, batch_size: int, lane: str | None) -> Span:
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM, "messaging.operation.type": "process", "messaging.operation.name": "process",
        "messaging.destination.name": message.topic, "messaging.consumer.group.name": group,
        "messaging.message.id": message.msg_id, "messaging.destination.partition.id":
        f"{message.broker_name}:{message.queue_id}", RECONSUME_TIMES: message.reconsume_times, GRAY: message.gray,
    }
    if lane or message.gray:
        attributes[LANE] = lane or GRAY_LANE
    if message.tags:
        attributes["rocketmq.message.tag"] = message.tags
    if batch_size != 1:
        attributes["messaging.batch.message_count"] = batch_size
    return graymq_tracer.start_span(f"process {message.topic}", context=propagate.extract(message.properties),
                                    kind=SpanKind.CONSUMER, attributes=attributes)
