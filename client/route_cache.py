"""Topic routes cached per topic, refreshed in the background: a slow or hung name server never holds up a send."""

from __future__ import annotations

import asyncio
import functools
import logging
import time

from graymq.client.nameserver_client import NameServerClient
from graymq.client.route import TopicRoute
from graymq.protocol.errors import GrayMQError, NameServerError

log = logging.getLogger(__name__)

RETRY_S = 2.0  # after a failed refresh, the cached route is served this long before the next try


class RouteCache:
    """Routes per topic, with one name-server lookup in flight per topic.

    A route younger than ``ttl_s`` is served as is. An older one is still served at once, while one
    refresh runs in the background; a failed refresh keeps the cached route and is tried again
    ``retry_s`` later. Only a topic without a cached route waits for the name server (the first sends
    of a topic all wait for the same lookup), and ``get(topic, refresh=True)``, which asks the name
    server again and waits for its answer (a cached route is still the fallback while no name server
    answers, but a topic the name server no longer knows raises ``TopicNotExistError``).
    """

    def __init__(self, nameserver: NameServerClient, ttl_s: float = 30.0, retry_s: float = RETRY_S) -> None:
        self.nameserver = nameserver
        self.ttl_s = ttl_s
        self.retry_s = retry_s
        self._routes: dict[str, TopicRoute] = {}
        self._due: dict[str, float] = {}  # topic -> when (monotonic) its route is to be refreshed
        self._lookups: dict[str, asyncio.Future[TopicRoute]] = {}
        self._failing: set[str] = set()  # topics whose last refresh failed (logged once until one succeeds)

    async def get(self, topic: str, *, refresh: bool = False) -> TopicRoute:
        cached = self._routes.get(topic)
        if cached is not None and not refresh:
            if time.monotonic() >= self._due[topic]:
                self._lookup(topic)  # in the background: the cached route serves meanwhile
            return cached
        return await asyncio.shield(self._lookup(topic))  # a cancelled caller leaves the lookup to the others

    def _lookup(self, topic: str) -> asyncio.Future[TopicRoute]:
        """The lookup of ``topic`` in flight, started if there is none."""
        lookup = self._lookups.get(topic)
        if lookup is None:
            lookup = self._lookups[topic] = asyncio.ensure_future(self._fetch(topic))
            lookup.add_done_callback(functools.partial(self._looked_up, topic))
        return lookup

    def _looked_up(self, topic: str, lookup: asyncio.Future[TopicRoute]) -> None:
        if self._lookups.get(topic) is lookup:
            del self._lookups[topic]
        if not lookup.cancelled() and lookup.exception() is not None and topic in self._routes:
            log.debug("refreshing the route of %s failed: %s", topic, lookup.exception())

    async def _fetch(self, topic: str) -> TopicRoute:
        cached = self._routes.get(topic)
        try:
            route = await self.nameserver.get_route(topic)
        except GrayMQError as exc:
            self._due[topic] = time.monotonic() + self.retry_s
            if cached is None or not isinstance(exc, NameServerError):
                raise
            if topic not in self._failing:
                log.warning("name servers unreachable; serving the cached route of %s (retrying every %gs)",
                            topic, self.retry_s)
                self._failing.add(topic)
            return cached
        if topic in self._failing:
            log.info("route of %s refreshed", topic)
            self._failing.discard(topic)
        self._routes[topic] = route
        self._due[topic] = time.monotonic() + self.ttl_s
        return route

    async def close(self) -> None:
        """Cancel the lookups in flight (their senders, if any are left, see the cancellation)."""
        lookups = list(self._lookups.values())
        for lookup in lookups:
            lookup.cancel()
        await asyncio.gather(*lookups, return_exceptions=True)

    def fresh(self, topic: str) -> TopicRoute | None:
        """The cached route while no refresh of it is due (no coroutine: the send path's lookup), else None."""
        route = self._routes.get(topic)
        if route is not None and time.monotonic() < self._due[topic]:
            return route
        return None

    def cached(self, topic: str) -> TopicRoute | None:
        return self._routes.get(topic)

    def invalidate(self, topic: str) -> None:
        """Refresh the route at its next use (it stays the fallback meanwhile)."""
        if topic in self._due:
            self._due[topic] = 0.0

    def topics(self) -> list[str]:
        return sorted(self._routes)

    def brokers(self) -> dict[str, str]:
        """broker name -> address over every cached route."""
        return {b.broker_name: b.address for route in self._routes.values() for b in route.brokers}
