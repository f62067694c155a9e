"""Topic routes cached per topic, refreshed in the background: a slow or hung name server never holds up a send.

``SharedRouteCache`` is what clients hold: a view of the ``SharedRoutes`` of their ``ClientInstance``
(client/instance.py), so the clients given one ``ClientConfig`` ask once per topic; each cache refreshes a route
at a jittered interval, so a fleet started together does not refresh in lockstep. The lookups of one turn of the
loop go in one request, with every other route that is due within half the interval (``POST /v1/topic-routes``):
a process consuming fifty groups refreshes its fifty retry topics and its own together, not in fifty requests.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeVar, cast

from graymq.core.route import TopicRoute
from graymq.nameserver_api.client import NotFoundError
from graymq.protocol.errors import GrayMQError, NameServerError, TopicNotExistError

log = logging.getLogger(__name__)
T = TypeVar("T")

RETRY_S = 2.0  # after a failed refresh, the cached route is served this long before the next try
MAX_BACKOFF = 4  # refreshes failing in a row wait retry_s, then twice, then four times as long
JITTER = 0.2  # a route is refreshed after ttl_s × (1 ± JITTER), drawn per refresh


class RouteSource(Protocol):
    async def get_route(self, topic: str) -> TopicRoute: ...


class RoutesSource(RouteSource, Protocol):
    """A source that also looks several topics up in one request (``NameServerClient.get_routes``)."""

    async def get_routes(self, topics: Sequence[str]) -> dict[str, TopicRoute | GrayMQError]: ...


class RouteCache:
    """Routes per topic, with one name-server lookup in flight per topic.

    A route younger than ``ttl_s`` (± ``jitter`` × ``ttl_s``, drawn at each refresh) is served as is. An older
    one is still served at once, while one refresh runs in the background; a failed refresh keeps the cached
    route and is tried again ``retry_s`` later (then less often while it keeps failing, ``_backoff``). Only a
    topic without a cached route waits for the name server
    (the first sends of a topic all wait for the same lookup), and ``get(topic, refresh=True)``, which asks the name
    server again and waits for its answer (a cached route is still the fallback while no name server
    answers, but a topic the name server no longer knows raises ``TopicNotExistError``).

    When the lookup of a topic without a cached route failed (no name server answered, or none knows the topic),
    the callers of the next ``retry_s`` get that failure at once (``refresh=True`` still asks, as a producer's
    retry does): a name server is asked once per topic and interval, not once per caller (a fleet's consumers each
    look their topics up on every beat and rebalance, their retry topics too before a broker registered them; an
    overloaded name server's listen queue filled with the lookups their clients had given up on).
    """

    def __init__(self, nameserver: RouteSource, ttl_s: float = 30.0, retry_s: float = RETRY_S,
                 jitter: float = JITTER, clock: Callable[[], float] = time.monotonic) -> None:
        self.nameserver = nameserver
        self._clock = clock
        self.ttl_s = ttl_s
        self.retry_s = retry_s
        self.jitter = jitter
        self._routes: dict[str, TopicRoute] = {}
        self._due: dict[str, float] = {}  # topic -> when (monotonic) its route is to be refreshed
        self._lookups: dict[str, asyncio.Future[TopicRoute]] = {}
        self._batch: list[str] = []  # topics whose lookup goes in the request of this turn of the loop
        self._requests: set[asyncio.Task[None]] = set()
        self._batched = hasattr(nameserver, "get_routes")  # False: topic by topic (a source or name server without)
        self._failing: set[str] = set()  # topics whose last refresh failed (logged once until one succeeds)
        self._failed: dict[str, tuple[float, GrayMQError]] = {}  # uncached topic -> (until, its lookup's failure)
        self._failures: dict[str, int] = {}  # topic -> its lookups failed in a row (``_backoff``)
        self._answered: dict[str, float] = {}  # topic -> when (monotonic) a name server last answered its route

    async def get(self, topic: str, *, refresh: bool = False) -> TopicRoute:
        cached = self._routes.get(topic)
        if cached is not None and not refresh:
            if self._clock() >= self._due[topic]:
                self._lookup(topic)  # in the background: the cached route serves meanwhile
            return cached
        if not refresh and (failed := self._failed.get(topic)) is not None and self._clock() < failed[0]:
            raise type(failed[1])(failed[1].message)
        return await asyncio.shield(self._lookup(topic))  # a cancelled caller leaves the lookup to the others

    def _lookup(self, topic: str) -> asyncio.Future[TopicRoute]:
        """The lookup of ``topic`` in flight, started if there is none: in this turn's request."""
        lookup = self._lookups.get(topic)
        if lookup is None:
            if not self._batch:
                asyncio.get_running_loop().call_soon(self._send)
            self._batch.append(topic)
            lookup = self._new_lookup(topic)
        return lookup

    def _new_lookup(self, topic: str) -> asyncio.Future[TopicRoute]:
        lookup = self._lookups[topic] = asyncio.get_running_loop().create_future()
        lookup.add_done_callback(functools.partial(self._looked_up, topic))
        return lookup

    def _send(self) -> None:
        """Send this turn's lookups with the cached routes due within half the interval (refreshed together from
        then on); not those whose refreshes fail, which keep their back-off."""
        batch, self._batch = self._batch, []
        soon = self._clock() + self.ttl_s / 2
        due = [t for t, at in self._due.items()
               if at <= soon and t in self._routes and t not in self._lookups and t not in self._failures]
        for topic in due:
            self._new_lookup(topic)
        task = asyncio.ensure_future(self._fetch_all(batch + due))
        self._requests.add(task)
        task.add_done_callback(self._requests.discard)

    def _looked_up(self, topic: str, lookup: asyncio.Future[TopicRoute]) -> None:
        if self._lookups.get(topic) is lookup:
            del self._lookups[topic]
        if not lookup.cancelled() and lookup.exception() is not None and topic in self._routes:
            log.debug("refreshing the route of %s failed: %s", topic, lookup.exception())

    async def _fetch_all(self, topics: list[str]) -> None:
        """Look ``topics`` up (in one request when the source takes several) and settle their lookups."""
        try:
            outcomes = await self._outcomes(topics)
        except Exception as exc:  # noqa: BLE001 - not a name server's answer: every lookup of the request raises it
            outcomes = dict.fromkeys(topics, exc)
        for topic in topics:
            lookup = self._lookups.get(topic)
            if lookup is None or lookup.done():
                continue
            try:
                lookup.set_result(self._settle(topic, outcomes[topic]))
            except Exception as exc:  # noqa: BLE001 - handed to the lookup's callers
                lookup.set_exception(exc)

    async def _outcomes(self, topics: list[str]) -> dict[str, TopicRoute | GrayMQError]:
        if self._batched:
            try:
                return await cast(RoutesSource, self.nameserver).get_routes(topics)
            except NotFoundError:
                self._batched = False  # a name server from before batched routes: topic by topic from now on
            except GrayMQError as exc:
                return dict.fromkeys(topics, exc)
        return dict(zip(topics, await asyncio.gather(*(self._fetch_one(t) for t in topics)), strict=True))

    async def _fetch_one(self, topic: str) -> TopicRoute | GrayMQError:
        try:
            return await self.nameserver.get_route(topic)
        except GrayMQError as exc:
            return exc

    def _settle(self, topic: str, outcome: TopicRoute | Exception) -> TopicRoute:
        """Cache a lookup's route (an unchanged one stays the cached object); for a failure, the cached route while
        no name server answers, else raise it."""
        cached = self._routes.get(topic)
        if isinstance(outcome, Exception):
            exc = outcome
            self._due[topic] = self._clock() + self._backoff(topic)
            if cached is None and isinstance(exc, (NameServerError, TopicNotExistError)):
                self._failed[topic] = (self._due[topic], exc)
            if cached is None or not isinstance(exc, NameServerError):
                raise exc
            if topic not in self._failing:
                log.warning("name servers unreachable; serving the cached route of %s (retrying in %gs, then "
                            "less often)", topic, self.retry_s)
                self._failing.add(topic)
            return cached
        if topic in self._failing:
            log.info("route of %s refreshed", topic)
            self._failing.discard(topic)
        self._failed.pop(topic, None)
        self._failures.pop(topic, None)
        if outcome != cached:  # what is keyed by a route's id (a group's allocation) holds while it is unchanged
            self._routes[topic] = outcome
        self._answered[topic] = self._clock()
        self._due[topic] = self._clock() + self.ttl_s * (1.0 + random.uniform(-self.jitter, self.jitter))
        return self._routes[topic]

    def _backoff(self, topic: str) -> float:
        """How long until the next lookup of ``topic`` after one more failure in a row: ``retry_s``, doubled with each
        failure up to ``MAX_BACKOFF`` times it, ± ``jitter``: a name server too slow to answer in time is not asked
        again by every process every ``retry_s`` for every topic (1,867 retries in a few minutes at 5,000 clients
        kept its listen queue full), and one back from an outage is asked again within seconds."""
        failures = self._failures[topic] = self._failures.get(topic, 0) + 1
        delay = self.retry_s * min(2 ** min(failures - 1, 16), MAX_BACKOFF)
        return delay * (1.0 + random.uniform(-self.jitter, self.jitter)) if failures > 1 else delay

    async def close(self) -> None:
        """Cancel the lookups in flight (their senders, if any are left, see the cancellation)."""
        requests = list(self._requests)
        for task in requests:
            task.cancel()
        await asyncio.gather(*requests, return_exceptions=True)
        for lookup in list(self._lookups.values()):
            lookup.cancel()

    def fresh(self, topic: str) -> TopicRoute | None:
        """The cached route while no refresh of it is due (no coroutine: the send path's lookup), else None."""
        route = self._routes.get(topic)
        if route is not None and self._clock() < self._due[topic]:
            return route
        return None

    def cached(self, topic: str) -> TopicRoute | None:
        return self._routes.get(topic)

    def age_s(self, topic: str) -> float | None:
        """Seconds since a name server last answered the route of ``topic`` (None: never)."""
        answered = self._answered.get(topic)
        return None if answered is None else self._clock() - answered

    def invalidate(self, topic: str) -> None:
        """Refresh the route at its next use (it stays the fallback meanwhile)."""
        if topic in self._due:
            self._due[topic] = 0.0

    def topics(self) -> list[str]:
        return sorted(self._routes)

    def brokers(self) -> dict[str, str]:
        """broker name -> address over every cached route."""
        return {b.broker_name: b.address for route in self._routes.values() for b in route.brokers}


class SharedRoutes:
    """One ``RouteCache`` and the clients using it (a ``ClientInstance``'s routes); it asks through the
    name-server client of its latest user."""

    def __init__(self, ttl_s: float = 30.0) -> None:
        self.members: dict[SharedRouteCache, None] = {}  # in order of use, the latest last
        self.cache = RouteCache(self, ttl_s)

    def used_by(self, member: SharedRouteCache) -> None:
        self.members.pop(member, None)
        self.members[member] = None

    async def get_route(self, topic: str) -> TopicRoute:
        """The lookup, through the latest user's client; through the next one if that user closed meanwhile."""
        return await self._through_latest(lambda source: source.get_route(topic), f"the route of {topic}")

    async def get_routes(self, topics: Sequence[str]) -> dict[str, TopicRoute | GrayMQError]:
        """``get_route`` of several topics in one request; ``NotFoundError`` when the client asks topic by topic."""
        async def ask(source: RouteSource) -> dict[str, TopicRoute | GrayMQError]:
            if not hasattr(source, "get_routes"):
                raise NotFoundError("this name-server client looks routes up topic by topic")
            return await cast(RoutesSource, source).get_routes(topics)

        return await self._through_latest(ask, f"the routes of {len(topics)} topics")

    async def _through_latest(self, call: Callable[[RouteSource], Awaitable[T]], what: str) -> T:
        while self.members:
            member = next(reversed(self.members))
            try:
                return await call(member.nameserver)
            except Exception:  # noqa: BLE001 - re-raised unless its client closed under it (then the next asks)
                if member in self.members:
                    raise
        raise NameServerError(f"no open client left to look up {what}")

    async def close(self) -> None:
        await self.cache.close()


class SharedRouteCache:
    """A client's routes: a view of the ``SharedRoutes`` it shares with the other clients of its
    ``ClientInstance`` (``table``; without one, a table of its own), joined when built, left at ``close``
    (the last one out cancels the lookups in flight).

    It has ``RouteCache``'s methods and semantics, but ``topics()`` and ``brokers()`` cover only the topics this
    client used. Lookups go through ``nameserver``, this client's name-server client (or that of another
    client sharing the table, whichever used it last).
    """

    def __init__(self, nameserver: RouteSource, ttl_s: float = 30.0, *, table: SharedRoutes | None = None) -> None:
        self.nameserver = nameserver
        self.ttl_s = ttl_s
        self._table = table if table is not None else SharedRoutes(ttl_s)
        self._table.members[self] = None
        self._cache = self._table.cache
        self._topics: set[str] = set()

    async def get(self, topic: str, *, refresh: bool = False) -> TopicRoute:
        self._topics.add(topic)
        self._table.used_by(self)
        return await self._cache.get(topic, refresh=refresh)

    def fresh(self, topic: str) -> TopicRoute | None:
        self._topics.add(topic)
        return self._cache.fresh(topic)

    def cached(self, topic: str) -> TopicRoute | None:
        return self._cache.cached(topic)

    def age_s(self, topic: str) -> float | None:
        return self._cache.age_s(topic)

    def invalidate(self, topic: str) -> None:
        """Refresh the route at its next use, for every client sharing it (it stays the fallback meanwhile)."""
        self._cache.invalidate(topic)

    def topics(self) -> list[str]:
        """The topics this client used that have a cached route."""
        return sorted(t for t in self._topics if self.cached(t) is not None)

    def brokers(self) -> dict[str, str]:
        """broker name -> address over the cached routes of the topics this client used."""
        return {b.broker_name: b.address for t in self._topics if (r := self.cached(t)) for b in r.brokers}

    async def close(self) -> None:
        """Leave the shared table; the last client to leave cancels its lookups in flight."""
        if self not in self._table.members:
            return  # closed already
        del self._table.members[self]
        if not self._table.members:
            await self._table.close()


Routes = RouteCache | SharedRouteCache  # what backlog queries take
