"""Stock clients as the RocketMQ 5 SDKs talk to the broker's gRPC endpoint, without an SDK: a telemetry stream that
carries the client's settings and stays open for its life (the broker registers the client in the name server from
it), and, for a consumer, QueryAssignment."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc

from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from graymq.protocol.rocketmq_v2 import service_pb2 as v2s
from graymq.protocol.rocketmq_v2 import service_pb2_grpc


class RawStockClient:
    """A stock client named ``client_id`` whose telemetry stream says ``settings``: ``await open()`` (the broker's
    answer to them), ``await close()``."""

    def __init__(self, address: str, client_id: str, settings: v2.Settings) -> None:
        self.client_id, self.settings = client_id, settings
        self.channel = grpc.aio.insecure_channel(address)
        self.stub = service_pb2_grpc.MessagingServiceStub(self.channel)
        self.metadata = (("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"))
        self._closed = asyncio.Event()
        self._stream: Any = None

    async def _commands(self) -> AsyncIterator[v2s.TelemetryCommand]:
        yield v2s.TelemetryCommand(settings=self.settings)
        await self._closed.wait()

    async def open(self) -> v2s.TelemetryCommand:
        self._stream = self.stub.Telemetry(self._commands(), metadata=self.metadata)
        return await self._stream.read()

    async def close(self) -> None:
        self._closed.set()
        await self.channel.close()


class RawStockConsumer(RawStockClient):
    """A simple consumer of ``topic`` in ``group``; ``assigned()``: the queue ids QueryAssignment gives it."""

    def __init__(self, address: str, client_id: str, group: str, topic: str) -> None:
        subscription = v2.Subscription(group=v2.Resource(name=group), subscriptions=[v2.SubscriptionEntry(
            topic=v2.Resource(name=topic), expression=v2.FilterExpression(type=v2.TAG, expression="*"))])
        super().__init__(address, client_id, v2.Settings(client_type=v2.SIMPLE_CONSUMER, subscription=subscription))
        self.group, self.topic = group, topic

    async def assigned(self) -> set[int]:
        answer = await self.stub.QueryAssignment(v2s.QueryAssignmentRequest(
            topic=v2.Resource(name=self.topic), group=v2.Resource(name=self.group)), metadata=self.metadata,
            timeout=10)
        assert answer.status.code == v2.OK, answer.status
        return {a.message_queue.id for a in answer.assignments}


class RawStockProducer(RawStockClient):
    """A producer publishing to ``topic`` (the broker registers it in the producer group named after it)."""

    def __init__(self, address: str, client_id: str, topic: str) -> None:
        super().__init__(address, client_id, v2.Settings(
            client_type=v2.PRODUCER, publishing=v2.Publishing(topics=[v2.Resource(name=topic)])))
