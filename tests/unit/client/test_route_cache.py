"""The route cache serves a cached route at once and refreshes it in the background, one lookup per topic."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from graymq.client.route_cache import RouteCache
from graymq.core.route import BrokerData, TopicRoute
from graymq.nameserver_api.client import NotFoundError
from graymq.protocol.errors import GrayMQError, NameServerError, TopicNotExistError

pytestmark = pytest.mark.unit


def route(queues: int) -> TopicRoute:
    return TopicRoute("T", (BrokerData("b", "127.0.0.1:1", queues, 0),))


class FakeNameServer:
    """``get_route`` answers what ``answers`` holds next (a route or an error), once ``gate`` is set."""

    def __init__(self) -> None:
        self.answers: list[Any] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.calls = 0
        self.in_flight = 0
        self.most_in_flight = 0

    async def get_route(self, topic: str) -> TopicRoute:
        self.calls += 1
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await self.gate.wait()
            answer = self.answers.pop(0)
        finally:
            self.in_flight -= 1
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[no-any-return]


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_due_route_is_served_at_once_while_one_refresh_runs_in_the_background() -> None:
    async def scenario() -> None:
        ns = FakeNameServer()
        ns.answers = [route(4), route(8)]
        cache = RouteCache(ns, ttl_s=0.0)  # type: ignore[arg-type]
        assert (await cache.get("T")).brokers[0].queue_nums == 4
        ns.gate.clear()  # the name server hangs
        async with asyncio.timeout(5):  # the old cache waited here for the hung name server
            served = [await cache.get("T") for _ in range(20)]
        assert all(r.brokers[0].queue_nums == 4 for r in served)
        await settle()
        assert [(await cache.get("T")).brokers[0].queue_nums for _ in range(5)] == [4] * 5
        await settle()
        assert ns.most_in_flight == 1 and ns.calls == 2  # one refresh in flight, not one per get
        ns.gate.set()
        await settle()
        assert cache.cached("T") is not None and cache.cached("T").brokers[0].queue_nums == 8  # renewed
        await cache.close()

    asyncio.run(scenario())


def test_a_failed_refresh_keeps_the_cached_route_and_is_tried_again_later() -> None:
    async def scenario() -> None:
        ns = FakeNameServer()
        ns.answers = [route(4), NameServerError("down"), route(8)]
        cache = RouteCache(ns, ttl_s=0.0, retry_s=3600.0)  # type: ignore[arg-type]
        await cache.get("T")
        assert (await cache.get("T")).brokers[0].queue_nums == 4
        await settle()
        assert ns.calls == 2
        for _ in range(10):
            assert (await cache.get("T")).brokers[0].queue_nums == 4
        await settle()
        assert ns.calls == 2  # not retried before retry_s
        cache.invalidate("T")  # due now: the next use tries again
        await cache.get("T")
        await settle()
        assert ns.calls == 3 and cache.cached("T").brokers[0].queue_nums == 8  # type: ignore[union-attr]
        await cache.close()

    asyncio.run(scenario())


def test_first_lookups_of_a_topic_share_one_request_and_an_explicit_refresh_waits_for_the_answer() -> None:
    async def scenario() -> None:
        ns = FakeNameServer()
        ns.answers = [route(4), NameServerError("down"), TopicNotExistError("topic T is unknown")]
        cache = RouteCache(ns, ttl_s=3600.0)  # type: ignore[arg-type]
        routes = await asyncio.gather(*(cache.get("T") for _ in range(10)))
        assert ns.calls == 1 and all(r is routes[0] for r in routes)
        assert await cache.get("T", refresh=True) is routes[0]  # no name server: the cached route
        with pytest.raises(TopicNotExistError):  # the name server no longer knows it
            await cache.get("T", refresh=True)
        await cache.close()

    asyncio.run(scenario())


def test_without_a_cached_route_a_failed_lookup_raises() -> None:
    async def scenario() -> None:
        ns = FakeNameServer()
        ns.answers = [NameServerError("down")]
        cache = RouteCache(ns)  # type: ignore[arg-type]
        with pytest.raises(NameServerError):
            await cache.get("T")

    asyncio.run(scenario())


def test_a_failed_lookup_of_a_topic_without_a_route_is_shared_for_the_retry_interval() -> None:
    """A fleet's consumers look their topics up on every beat and rebalance: while no name server answers, or none
    knows the topic yet, those lookups share the last failure for ``retry_s`` instead of each sending a request;
    ``refresh=True`` (a producer's retry) still asks."""
    async def scenario() -> None:
        ns = FakeNameServer()
        ns.answers = [NameServerError("GET /route failed on every name server: ReadTimeout")]
        cache = RouteCache(ns, retry_s=60.0)  # type: ignore[arg-type]
        for _ in range(20):
            with pytest.raises(NameServerError, match="ReadTimeout"):
                await cache.get("T")
        assert ns.calls == 1
        ns.answers = [route(4)]
        assert (await cache.get("T", refresh=True)).brokers[0].queue_nums == 4
        assert ns.calls == 2 and (await cache.get("T")).brokers[0].queue_nums == 4

        ns.answers = [TopicNotExistError("no route for topic U"), route(2)]
        for _ in range(5):
            with pytest.raises(TopicNotExistError, match="no route for topic U"):
                await cache.get("U")
        assert ns.calls == 3
        assert (await cache.get("U", refresh=True)).brokers[0].queue_nums == 2  # created meanwhile

    asyncio.run(scenario())


def test_a_route_whose_refreshes_keep_failing_is_asked_for_less_and_less_often() -> None:
    async def scenario() -> None:
        now = [0.0]
        ns = FakeNameServer()
        ns.answers = [route(4), *[NameServerError("down")] * 5, route(8), *[NameServerError("down")] * 20]
        cache = RouteCache(ns, ttl_s=30.0, retry_s=2.0, jitter=0.0, clock=lambda: now[0])  # type: ignore[arg-type]
        await cache.get("T")
        asked_at = []
        for _ in range(300):  # the route's users look it up every 0.5 s for 150 s
            now[0] += 0.5
            calls = ns.calls
            assert (await cache.get("T")).brokers[0].queue_nums in (4, 8)  # the cached route serves throughout
            await settle()
            if ns.calls > calls:
                asked_at.append(now[0])
        # due at 30 s; failing, asked again 2, 4, 8, 8, 8 s later; through at 60, due 30 s on; failing: 2 s again
        assert asked_at == [30.0, 32.0, 36.0, 44.0, 52.0, 60.0, 90.0, 92.0, 96.0, *range(104, 150, 8)]
        await cache.close()

    asyncio.run(scenario())


class BatchingNameServer:
    """A name server taking several topics a request (``get_routes``): each request's topics recorded; ``missing``
    topics get ``TopicNotExistError``; ``old`` answers as a name server from before batched routes."""

    def __init__(self, missing: tuple[str, ...] = (), old: bool = False) -> None:
        self.requests: list[list[str]] = []
        self.singles: list[str] = []
        self.missing = missing
        self.old = old

    async def get_routes(self, topics: list[str]) -> dict[str, TopicRoute | GrayMQError]:
        if self.old:
            raise NotFoundError("POST /v1/topic-routes: Not Found")
        self.requests.append(list(topics))
        return {t: TopicNotExistError(f"no route for topic {t}") if t in self.missing else route(4) for t in topics}

    async def get_route(self, topic: str) -> TopicRoute:
        self.singles.append(topic)
        return route(4)


def test_the_lookups_of_one_turn_go_in_one_request_and_an_unknown_topic_fails_alone() -> None:
    async def scenario() -> None:
        ns = BatchingNameServer(missing=("GONE",))
        cache = RouteCache(ns)  # type: ignore[arg-type]
        got = await asyncio.gather(*(cache.get(t) for t in ("A", "B", "GONE", "C")), return_exceptions=True)
        assert ns.requests == [["A", "B", "GONE", "C"]] and not ns.singles
        assert isinstance(got[2], TopicNotExistError) and all(isinstance(r, TopicRoute) for r in got[:2] + got[3:])

    asyncio.run(scenario())


def test_routes_due_within_half_the_interval_are_refreshed_with_the_one_due_and_stay_together() -> None:
    """A process's retry topics and its own, cached at different times, end up refreshed in one request."""

    async def scenario() -> None:
        now = [0.0]
        ns = BatchingNameServer()
        cache = RouteCache(ns, ttl_s=30.0, jitter=0.0, clock=lambda: now[0])  # type: ignore[arg-type]
        await cache.get("A")
        now[0] = 10.0
        await cache.get("B")  # due at 40; A, due at 30, is not within half the interval yet
        now[0] = 31.0  # A is due; B within half the interval
        await cache.get("A")
        await settle()
        assert ns.requests == [["A"], ["B"], ["A", "B"]]
        now[0] = 62.0
        await cache.get("B")
        await settle()
        assert ns.requests[-1] == ["B", "A"]  # due together from then on

    asyncio.run(scenario())


def test_a_failing_route_keeps_its_back_off_when_another_refresh_goes_out() -> None:
    async def scenario() -> None:
        now = [0.0]
        ns = BatchingNameServer()
        cache = RouteCache(ns, ttl_s=30.0, jitter=0.0, clock=lambda: now[0])  # type: ignore[arg-type]
        await asyncio.gather(cache.get("A"), cache.get("B"))
        now[0] = 31.0
        ns.missing = ("B",)  # B's next refresh fails: asked again in retry_s, not at the next request
        await cache.get("B")
        await settle()
        ns.missing = ()
        now[0] = 31.5
        await cache.get("A", refresh=True)
        assert ns.requests[-1] == ["A"]

    asyncio.run(scenario())


def test_a_name_server_without_batched_routes_is_asked_topic_by_topic_from_then_on() -> None:
    async def scenario() -> None:
        ns = BatchingNameServer(old=True)
        cache = RouteCache(ns)  # type: ignore[arg-type]
        await asyncio.gather(cache.get("A"), cache.get("B"))
        await cache.get("C")
        assert ns.singles == ["A", "B", "C"] and not ns.requests

    asyncio.run(scenario())


def test_a_refresh_answering_the_same_route_keeps_the_cached_object_and_a_changed_one_replaces_it() -> None:
    """What is computed from a route and keyed by its id (a group's allocation) holds across a refresh that changed
    nothing: a fleet worker recomputed every group of a topic at each refresh."""
    async def scenario() -> None:
        ns = FakeNameServer()
        ns.answers = [route(4), route(4), route(8)]
        now = [100.0]
        cache = RouteCache(ns, ttl_s=0.0, clock=lambda: now[0])  # type: ignore[arg-type]
        assert cache.age_s("T") is None
        first = await cache.get("T")
        now[0] += 7.0
        assert cache.age_s("T") == 7.0
        assert await cache.get("T", refresh=True) is first
        assert cache.age_s("T") == 0.0  # answered again, though the route did not change
        changed = await cache.get("T", refresh=True)
        assert changed is not first and changed.brokers[0].queue_nums == 8 and cache.cached("T") is changed
        await cache.close()

    asyncio.run(scenario())
