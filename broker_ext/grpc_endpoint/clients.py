"""Stock clients' lifecycle RPCs: Telemetry (their settings, both ways), Heartbeat and NotifyClientTermination.

A client opens one telemetry stream per broker it talks to and keeps it for its life. Each ``settings`` command
is stored (``ClientTable``: what the client said it is — type, topics, consumer group) and answered with the
merged settings (``settings.merged_settings``); a producer is registered at once in the producer group of each of
its topics (``producer_sides``), a consumer in its consumer group with its topics (``consumer_sides``), so the name
server lists it and a flip reaches it before its first send or receive. Other
client commands (a thread stack trace, a verify result) are answered by the broker only once it asks for them,
which it does not yet: they are logged and dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from graymq.broker_ext.grpc_endpoint.consumer_sides import ConsumerSides
from graymq.broker_ext.grpc_endpoint.credentials import Caller
from graymq.broker_ext.grpc_endpoint.producer_sides import ProducerSides
from graymq.broker_ext.grpc_endpoint.settings import EndpointLimits, merged_settings
from graymq.broker_ext.grpc_endpoint.status import OK, RocketMQStatusError, status
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from graymq.protocol.rocketmq_v2 import service_pb2 as v2s

log = logging.getLogger(__name__)

CONSUMER_TYPES = (v2.SIMPLE_CONSUMER, v2.PUSH_CONSUMER)
FIRST_COMMAND_S = 1.0  # how long a refused stream waits for the client's first command


async def first_command_heard(commands: AsyncIterator[object]) -> None:
    """Let the client's first command (its settings) arrive, ``FIRST_COMMAND_S`` at most, before a refusal ends its
    stream: a stream ended while the client still writes reaches it as gRPC's INTERNAL, the refusal's message lost."""
    with contextlib.suppress(TimeoutError, StopAsyncIteration, RocketMQStatusError):
        await asyncio.wait_for(anext(commands), FIRST_COMMAND_S)


@dataclass(slots=True)
class StockClient:
    client_id: str
    settings: v2.Settings


class ClientTable:
    """The stock clients' last settings, by client id, while a stream of theirs is open."""

    def __init__(self, limits: EndpointLimits, sides: ProducerSides, consumers: ConsumerSides) -> None:
        self.limits = limits
        self.sides = sides
        self.consumers = consumers
        self.clients: dict[str, StockClient] = {}

    async def telemetry(self, commands: AsyncIterator[v2s.TelemetryCommand], caller: Caller
                        ) -> AsyncIterator[v2s.TelemetryCommand]:
        if not caller.client_id:
            yield v2s.TelemetryCommand(status=status(v2.CLIENT_ID_REQUIRED, "x-mq-client-id metadata is required"))
            return
        try:
            self.sides.stream_opened(caller)
        except RocketMQStatusError as refused:
            await first_command_heard(commands)
            yield v2s.TelemetryCommand(status=refused.to_status())
            return
        self.consumers.registrations.stream_opened(caller.client_id)
        try:
            async for command in commands:
                if not command.HasField("settings"):
                    log.debug("stock client %s: telemetry %s dropped", caller.client_id, command.WhichOneof("command"))
                    continue
                settings = command.settings
                self.clients[caller.client_id] = StockClient(caller.client_id, settings)
                consumer = settings.client_type in CONSUMER_TYPES and self.consumers.enabled
                if consumer:
                    try:
                        self.consumers.check(caller, settings.subscription.group.name)
                    except RocketMQStatusError as refused:
                        yield v2s.TelemetryCommand(status=refused.to_status())
                        continue
                group = settings.subscription.group.name
                answered = self.consumers.consumption_of(group)
                yield v2s.TelemetryCommand(status=OK, settings=merged_settings(settings, self.limits, answered))
                try:
                    if consumer:  # answered first: a name server slow to answer does not hold up the client's start
                        await self.consumers.register(caller, group,
                                                      [s.topic.name for s in settings.subscription.subscriptions])
                        if (consumption := self.consumers.consumption_of(group)) != answered:
                            # the group's FIFO / max attempts as the name server's answer says: told again
                            yield v2s.TelemetryCommand(status=OK, settings=merged_settings(settings, self.limits,
                                                                                           consumption))
                    if settings.client_type == v2.PRODUCER and self.sides.enabled:
                        for topic in settings.publishing.topics:
                            await self.sides.register(caller, topic.name)
                except RocketMQStatusError as refused:  # over its principal's budget of registrations
                    yield v2s.TelemetryCommand(status=refused.to_status())
        finally:
            self.clients.pop(caller.client_id, None)
            await self.sides.stream_closed(caller.client_id)
            await self.consumers.registrations.stream_closed(caller.client_id)

    async def heartbeat(self, request: v2s.HeartbeatRequest, caller: Caller) -> v2s.HeartbeatResponse:
        """A sign of life. A stock client's registrations in the name server last as long as its telemetry stream
        (or, without one, its sends and receives), so this needs no bookkeeping."""
        return v2s.HeartbeatResponse(status=OK)

    async def terminate(self, request: v2s.NotifyClientTerminationRequest, caller: Caller
                        ) -> v2s.NotifyClientTerminationResponse:
        """The client shuts down: it leaves its producer and consumer groups in the name server at once."""
        if caller.client_id:
            self.sides.claim(caller)
            self.clients.pop(caller.client_id, None)
            await self.sides.forget(caller.client_id)
            await self.consumers.registrations.forget(caller.client_id)
        return v2s.NotifyClientTerminationResponse(status=OK)
