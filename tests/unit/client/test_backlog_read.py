"""Reading a group's backlog when a broker does not answer: the others' queues are kept, the silent broker is
asked once (not once per topic) and named with the queues whose backlog is unknown, and a caller that needs the
whole backlog gets ``BacklogUnavailable`` naming it (never a partial figure)."""

from __future__ import annotations

import asyncio

import pytest

from graymq.client.backlog import BacklogUnavailable, read_backlogs
from graymq.client.message import MessageQueue
from graymq.client.route_cache import RouteCache
from graymq.core.route import BrokerData, TopicRoute
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.errors import ConnectFailedError

pytestmark = pytest.mark.unit


class Routes:
    """Topics T1 and T2, 4 queues (gray 0 and 3) on broker-a and broker-b."""

    async def get_route(self, topic: str) -> TopicRoute:
        return TopicRoute(topic, tuple(BrokerData(name, f"{name}:1", 4, 2) for name in ("broker-a", "broker-b")))


class Brokers:
    """broker-a answers 5 messages behind on every queue; broker-b refuses connections."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    async def group_backlog(self, address: str, group: str, topic: str = "") -> list[pb.QueueBacklog]:
        self.asked.append((address, topic))
        if address.startswith("broker-b"):
            raise ConnectFailedError(f"cannot connect to {address}: refused")
        return [pb.QueueBacklog(topic=topic, queue_id=q, consumer_offset=10, min_offset=0, max_offset=15)
                for q in range(4)]


def test_a_broker_that_does_not_answer_is_asked_once_and_named_with_its_unknown_queues() -> None:
    brokers = Brokers()

    async def read():  # type: ignore[no-untyped-def]
        routes = RouteCache(Routes())
        return await read_backlogs(brokers, routes, "G", ["T1", "T2"], gray_only=True)  # type: ignore[arg-type]

    backlogs = asyncio.run(read())
    assert [(q.topic, q.broker_name, q.queue_id, q.backlog) for q in backlogs.queues] == [
        ("T1", "broker-a", 0, 5), ("T1", "broker-a", 3, 5), ("T2", "broker-a", 0, 5), ("T2", "broker-a", 3, 5)]
    [silent] = backlogs.unavailable
    assert (silent.broker_name, silent.address) == ("broker-b", "broker-b:1") and "refused" in silent.error
    assert silent.queues == tuple(MessageQueue(t, "broker-b", q) for t in ("T1", "T2") for q in (0, 3))
    assert brokers.asked.count(("broker-b:1", "T1")) == 1 and ("broker-b:1", "T2") not in brokers.asked

    with pytest.raises(BacklogUnavailable) as raised:
        backlogs.complete()
    assert raised.value.brokers == (silent,) and raised.value.retriable
    assert raised.value.message.startswith("backlog unavailable: broker broker-b (broker-b:1) did not answer: ")
