"""The clients of one ``ClientInstance`` share one route table: one lookup per topic, whichever client asks;
refreshes are jittered; a client closing leaves the others served."""

from __future__ import annotations

import asyncio
import types

import pytest

from graymq.client.route_cache import RouteCache, SharedRouteCache, SharedRoutes
from graymq.core.route import BrokerData, TopicRoute

pytestmark = pytest.mark.unit

URLS = ["http://127.0.0.1:1"]


def route(topic: str = "T", queues: int = 4) -> TopicRoute:
    return TopicRoute(topic, (BrokerData("b", "127.0.0.1:1", queues, 0),))


class FakeNameServerClient:
    """A client's name-server client: answers each lookup once ``gate`` is set; closed, its lookups fail as
    httpx's do."""

    def __init__(self, token: str | None = None) -> None:
        self.urls = URLS
        self.token = token
        self.gate = asyncio.Event()
        self.gate.set()
        self.calls = 0
        self.closed = False

    async def get_route(self, topic: str) -> TopicRoute:
        self.calls += 1
        await self.gate.wait()
        if self.closed:
            raise RuntimeError("Cannot send a request, as the client has been closed.")
        return route(topic)


def shared(ns: FakeNameServerClient, table: SharedRoutes | None = None) -> SharedRouteCache:
    return SharedRouteCache(ns, table=table)  # type: ignore[arg-type]


def test_two_clients_of_one_table_share_one_lookup_per_topic() -> None:
    async def scenario() -> None:
        a_ns, b_ns = FakeNameServerClient(), FakeNameServerClient()
        table = SharedRoutes()
        a, b = shared(a_ns, table), shared(b_ns, table)
        first, second = await asyncio.gather(a.get("T"), b.get("T"))
        assert first is second and a_ns.calls + b_ns.calls == 1
        assert b.fresh("T") is first and b_ns.calls + a_ns.calls == 1
        assert a.topics() == ["T"] and b.topics() == ["T"]
        await a.get("U")
        assert a.topics() == ["T", "U"] and b.topics() == ["T"]  # each reports the topics it uses
        await a.close()
        await b.close()

    asyncio.run(scenario())


def test_clients_of_other_tables_do_not_share() -> None:
    async def scenario() -> None:
        a_ns, b_ns = FakeNameServerClient("t1"), FakeNameServerClient("t2")
        a, b = shared(a_ns), shared(b_ns)
        await a.get("T")
        await b.get("T")
        assert (a_ns.calls, b_ns.calls) == (1, 1)
        await a.close()
        await b.close()

    asyncio.run(scenario())


def test_a_client_closing_during_a_lookup_leaves_the_others_served() -> None:
    async def scenario() -> None:
        a_ns, b_ns = FakeNameServerClient(), FakeNameServerClient()
        table = SharedRoutes()
        a, b = shared(a_ns, table), shared(b_ns, table)
        a_ns.gate.clear()
        looking = asyncio.ensure_future(a.get("T"))  # the lookup goes through a's client
        await asyncio.sleep(0)
        waiting = asyncio.ensure_future(b.get("T"))
        await asyncio.sleep(0)
        await a.close()
        a_ns.closed = True  # its client closes under the lookup
        a_ns.gate.set()
        async with asyncio.timeout(5):
            assert await waiting == route("T")  # asked again through b's client
            await looking
        assert b_ns.calls == 1
        b.invalidate("T")  # after a broker connection failure: the next use refreshes
        await b.get("T")
        for _ in range(3):  # the lookups of a turn of the loop go out together, the turn after
            await asyncio.sleep(0)
        assert b_ns.calls == 2
        await b.close()

    asyncio.run(scenario())


def test_the_last_client_to_close_cancels_the_lookups_in_flight() -> None:
    async def scenario() -> None:
        ns = FakeNameServerClient()
        ns.gate.clear()
        a = shared(ns)
        looking = asyncio.ensure_future(a.get("T"))
        await asyncio.sleep(0)
        await a.close()
        with pytest.raises(asyncio.CancelledError):
            await looking
        b = shared(FakeNameServerClient())  # a new client starts a new cache
        assert b.cached("T") is None
        await b.close()

    asyncio.run(scenario())


def test_refreshes_are_due_at_a_jittered_ttl_within_its_bounds() -> None:
    clock = types.SimpleNamespace(now=100.0)

    async def scenario() -> None:
        cache = RouteCache(FakeNameServerClient(), ttl_s=10.0, jitter=0.2,  # type: ignore[arg-type]
                           clock=lambda: clock.now)
        topics = [f"T{i}" for i in range(50)]
        for topic in topics:
            await cache.get(topic)
        clock.now = 100.0 + 7.99
        assert all(cache.fresh(t) is not None for t in topics)
        clock.now = 100.0 + 10.0
        fresh = sum(cache.fresh(t) is not None for t in topics)
        assert 0 < fresh < len(topics)  # spread: not all due at once
        clock.now = 100.0 + 12.0
        assert all(cache.fresh(t) is None for t in topics)
        await cache.close()

    asyncio.run(scenario())
