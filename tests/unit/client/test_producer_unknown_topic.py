"""A send to a topic the route has but the broker does not know yet is asked again, not failed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from graymq.client.message import Message
from graymq.client.producer import Producer
from graymq.core.route import BrokerData, TopicRoute
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.errors import TopicNotExistError

pytestmark = pytest.mark.unit

ROUTE = TopicRoute("T", (BrokerData("broker-a", "127.0.0.1:1", 4, 0),))


class FakeNameServer:
    """Knows topic T until ``deleted`` is set."""

    def __init__(self) -> None:
        self.deleted = False

    async def get_route(self, topic: str) -> TopicRoute:
        if self.deleted:
            raise TopicNotExistError(f"no route for topic {topic}: topic {topic} is unknown")
        return ROUTE


class FakeBrokers:
    """Refuses the first ``unknown_for`` sends as a broker that has not learned the topic yet."""

    def __init__(self, unknown_for: int) -> None:
        self.unknown_for = unknown_for
        self.attempts = 0

    async def send(self, address: str, req: pb.SendRequest, timeout_s: float) -> pb.SendResponse:
        self.attempts += 1
        if self.attempts <= self.unknown_for:
            raise TopicNotExistError("topic T does not exist on broker broker-a")
        return pb.SendResponse(msg_id=req.message.msg_id, queue_offset=7)

    async def close(self) -> None:
        pass


def producer(brokers: FakeBrokers, nameserver: FakeNameServer, retry_times: int = 0) -> Producer:
    p = Producer("P", "http://127.0.0.1:1", retry_times=retry_times, auto_batch=False)
    p.routes.nameserver = nameserver  # type: ignore[assignment]
    p.brokers = brokers  # type: ignore[assignment]
    p.started = True
    return p


def send(p: Producer, timeout_s: float) -> Any:
    async def go() -> Any:
        try:
            return await p.send(Message("T", b"x"), timeout_s=timeout_s)
        finally:
            await p.routes.close()
            await p.nameserver.close()

    return asyncio.run(go())


def test_a_broker_that_learns_the_topic_within_the_timeout_takes_the_send_whatever_retry_times_is() -> None:
    brokers = FakeBrokers(unknown_for=4)
    result = send(producer(brokers, FakeNameServer(), retry_times=0), timeout_s=10.0)
    assert (result.queue_offset, brokers.attempts) == (7, 5)


def test_a_broker_that_never_learns_the_topic_fails_the_send_at_its_timeout_with_its_own_error() -> None:
    brokers = FakeBrokers(unknown_for=10**6)
    with pytest.raises(TopicNotExistError, match="does not exist on broker broker-a"):
        send(producer(brokers, FakeNameServer()), timeout_s=0.3)
    assert brokers.attempts > 1


def test_a_topic_the_name_server_no_longer_knows_fails_at_the_first_refusal() -> None:
    brokers = FakeBrokers(unknown_for=10**6)
    nameserver = FakeNameServer()
    p = producer(brokers, nameserver)

    async def go() -> None:
        try:
            await p.routes.get("T")  # cached while the topic existed
            nameserver.deleted = True
            with pytest.raises(TopicNotExistError, match="is unknown"):
                await p.send(Message("T", b"x"), timeout_s=60.0)
        finally:
            await p.routes.close()
            await p.nameserver.close()

    asyncio.run(go())
    assert brokers.attempts == 1
