"""QueryRoute's cache of the name server's routes, without a name server: with none reachable a topic's read fails
once per interval (every QueryRoute meanwhile answers this broker's queues at once), and the cache stays bounded
however many names clients ask for."""

from __future__ import annotations

import asyncio
import socket

import pytest

from graymq.broker_ext.grpc_endpoint import route
from graymq.broker_ext.grpc_endpoint.route import ClusterRoutes

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
