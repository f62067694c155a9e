"""QueryRoute's cache of the name server's routes, without a name server: with none reachable a topic's read fails
once per interval (every QueryRoute meanwhile answers this broker's queues at once), the cache stays bounded
however many names clients ask for, and an answer's queues are built once per layout."""

from __future__ import annotations

import asyncio
import socket

import pytest

from graymq.broker_ext.grpc_endpoint import route
from graymq.broker_ext.grpc_endpoint.credentials import Caller
from graymq.broker_ext.grpc_endpoint.route import ClusterRoutes
from graymq.broker_ext.grpc_endpoint.status import RocketMQStatusError
from graymq.broker_ext.security.principals import DEV_PRINCIPAL, Principal
from graymq.broker_ext.topic_config import TopicConfig
from graymq.protocol.acl import Rights
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from graymq.protocol.rocketmq_v2 import service_pb2 as v2s

pytestmark = pytest.mark.unit


def closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"  # nothing listens once the probe is closed


def test_an_unreachable_name_server_is_read_once_per_interval_shared_by_concurrent_calls() -> None:
    cluster = ClusterRoutes([closed_port_url()], None, ttl_s=60)

    async def calls() -> list[object]:
        together = await asyncio.gather(*(cluster.brokers("T") for _ in range(5)))
        answers = [*together, await cluster.brokers("T")]
        await cluster.close()
        return answers

    assert asyncio.run(calls()) == [None] * 6
    assert cluster.reads == 1


def test_the_cache_drops_expired_routes_past_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(route, "MAX_CACHED_TOPICS", 3)
    cluster = ClusterRoutes([closed_port_url()], None, ttl_s=0)

    async def many() -> None:
        for i in range(10):
            await cluster.brokers(f"T{i}")
        await cluster.close()

    asyncio.run(many())
    assert cluster.reads == 10 and len(cluster) <= 3


def test_query_route_answers_are_built_once_per_layout_and_still_refuse_a_foreign_topic() -> None:
    topics = {"T": TopicConfig("T", 8)}
    service = route.RouteService("b1", lambda: "127.0.0.1:9", topics.get)
    ask = v2s.QueryRouteRequest(topic=v2.Resource(name="T"))
    dev = Caller(DEV_PRINCIPAL, None, "c1")

    async def answers() -> list[v2s.QueryRouteResponse]:
        first, again = await service.query_route(ask, dev), await service.query_route(ask, dev)
        topics["T"] = TopicConfig("T", 4)
        return [first, again, await service.query_route(ask, dev)]

    first, again, resized = asyncio.run(answers())
    assert again is first and [q.id for q in first.message_queues] == list(range(8))
    assert [q.id for q in resized.message_queues] == list(range(4)) and first.message_queues[0].broker.name == "b1"
    outsider = Caller(Principal("orders", Rights.of(["ORDER_*"], [], False, False)), None, "c2")
    with pytest.raises(RocketMQStatusError, match="may not produce to or consume topic T"):
        asyncio.run(service.query_route(ask, outsider))
