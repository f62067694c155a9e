"""Topic routes cached per topic: refreshed after ``ttl_s`` or on demand, served stale while the name server is down."""

from __future__ import annotations

import asyncio
import functools
import logging
import time

from graymq.client.nameserver_client import NameServerClient
from graymq.client.route import TopicRoute
from graymq.protocol.errors import NameServerError

log = logging.getLogger(__name__)


class RouteCache:
    """One lookup in flight per topic: the sends that find no fresh route (first use, TTL expiry, a refresh
    after an error) all wait for the same name-server request instead of sending one each."""

    def __init__(self, nameserver: NameServerClient, ttl_s: float = 30.0) -> None:
        self.nameserver = nameserver
        self.ttl_s = ttl_s
        self._routes: dict[str, tuple[float, TopicRoute]] = {}
        self._lookups: dict[str, asyncio.Future[TopicRoute]] = {}

    async def get(self, topic: str, *, refresh: bool = False) -> TopicRoute:
        cached = self._routes.get(topic)
        if cached is not None and not refresh and time.monotonic() - cached[0] < self.ttl_s:
            return cached[1]
        lookup = self._lookups.get(topic)
        if lookup is None:
            lookup = self._lookups[topic] = asyncio.ensure_future(self._lookup(topic))
            lookup.add_done_callback(functools.partial(self._looked_up, topic))
        return await asyncio.shield(lookup)  # a cancelled sender leaves the lookup to the others

    def _looked_up(self, topic: str, lookup: asyncio.Future[TopicRoute]) -> None:
        if self._lookups.get(topic) is lookup:
            del self._lookups[topic]
        if not lookup.cancelled():
            lookup.exception()  # retrieved: the waiters (if any are left) got it

    async def _lookup(self, topic: str) -> TopicRoute:
        cached = self._routes.get(topic)
        try:
            route = await self.nameserver.get_route(topic)
        except NameServerError:
            if cached is None:
                raise
            log.warning("name servers unreachable; using the cached route of %s", topic)
            return cached[1]
        self._routes[topic] = (time.monotonic(), route)
        return route

    def fresh(self, topic: str) -> TopicRoute | None:
        """The cached route while younger than ``ttl_s`` (no coroutine: the send path's lookup), else None."""
        cached = self._routes.get(topic)
        if cached is not None and time.monotonic() - cached[0] < self.ttl_s:
            return cached[1]
        return None

    def cached(self, topic: str) -> TopicRoute | None:
        entry = self._routes.get(topic)
        return entry[1] if entry else None

    def invalidate(self, topic: str) -> None:
        entry = self._routes.get(topic)
        if entry is not None:
            self._routes[topic] = (0.0, entry[1])  # keep it as a fallback, refresh on next use

    def topics(self) -> list[str]:
        return sorted(self._routes)

    def brokers(self) -> dict[str, str]:
        """broker name -> address over every cached route."""
        return {b.broker_name: b.address for _, route in self._routes.values() for b in route.brokers}
