"""A name server answer naming a slot the cached route does not (a lane client's own lane's; any lane's for a base
client): that route is read again, once for every client sharing the routes, and no route already naming it
(client/lane_slots.py, ``refresh_behind``)."""

from __future__ import annotations

import asyncio

from graymq.client.lane_slots import refresh_behind, routes_behind
from graymq.client.route_cache import RouteCache
from graymq.core.route import BrokerData, TopicRoute

RETRY, TOPIC = "%RETRY%G", "T"


def route(topic: str, lanes: dict[str, int]) -> TopicRoute:
    return TopicRoute(topic, (BrokerData("b", "a:1", 4, 2),), TopicRoute.lane_pairs(lanes))


class Source:
    """The name server's routes (``lanes`` by topic), counting the reads."""

    def __init__(self) -> None:
        self.lanes: dict[str, dict[str, int]] = {RETRY: {}, TOPIC: {"gray": 0}}
        self.reads = 0

    async def get_route(self, topic: str) -> TopicRoute:
        self.reads += 1
        await asyncio.sleep(0)
        return route(topic, self.lanes[topic])


def test_only_routes_missing_the_answers_slot_are_behind() -> None:
    async def go() -> None:
        cache = RouteCache(Source())
        await cache.get(RETRY)
        await cache.get(TOPIC)
        answer = {RETRY: {"gray": 0}, TOPIC: {"gray": 0}, "UNCACHED": {"gray": 0}}
        assert routes_behind(cache, answer, "gray") == [RETRY]
        assert routes_behind(cache, answer, "v3") == []
        assert routes_behind(cache, {RETRY: {"v3": 1}}, "gray") == []
        # a base client follows every lane's slots: it adopts the queues of a lane left without clients
        assert routes_behind(cache, answer, None) == [RETRY]
        assert routes_behind(cache, {RETRY: {}, TOPIC: {"gray": 0}}, None) == []
        assert routes_behind(cache, {TOPIC: {}}, None) == [TOPIC]  # the lane gave its slot back

    asyncio.run(go())


def test_clients_sharing_the_routes_read_a_route_behind_once() -> None:
    async def go() -> None:
        source = Source()
        cache = RouteCache(source)
        await cache.get(RETRY)
        source.lanes[RETRY] = {"gray": 0}  # the name server's heartbeat took the slot
        before = source.reads
        answer = {RETRY: {"gray": 0}}
        changed = await asyncio.gather(*(refresh_behind(cache, answer, "gray") for _ in range(5)))
        assert source.reads - before == 1
        assert any(changed)
        cached = cache.cached(RETRY)
        assert cached is not None and cached.slot_of_lane("gray") == 0
        assert not await refresh_behind(cache, answer, "gray") and source.reads - before == 1

    asyncio.run(go())
