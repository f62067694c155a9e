"""Topic routes served from memory: every client of a topic asks for the same route, so each replica computes a
topic's route once per change of what it depends on (or once its first broker lease ends), not once per request."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from graymq.nameserver.schemas import TopicRoute
from graymq.nameserver.watch import BROKER_REGISTERED, LANE_SLOTS_CHANGED, TOPIC_TABLE_CHANGED

MAX_AGE_S = 30.0  # the longest a route is served from memory (a notification missed without a sign)
REPLICAS_AGE_S = 1.0  # a route listing replicas: their liveness and lag change without a notification
# What a route depends on: the topic table, the brokers' registrations (routes, addresses), broker sets' leaders,
# the lanes holding the topic's slots.
ROUTE_KEYS = frozenset({TOPIC_TABLE_CHANGED, BROKER_REGISTERED, LANE_SLOTS_CHANGED})


class RouteViews:
    """topic -> its route as last computed, served until the first lease of its brokers ends (at most ``max_age_s``;
    ``REPLICAS_AGE_S`` for a route listing replicas) while nothing it depends on changed.

    ``changed(keys)`` (``GroupChanges`` calls it with the keys of every commit, on this replica as it commits and
    through NOTIFY from the others on PostgreSQL; None when changes may have been missed) drops every cached route
    when a key a route depends on is among them. A lease ending is no change: a route is computed again as the
    first lease of its brokers ends, so an expired broker leaves it then. (Served for at most a second, a fleet's
    routes were computed on nearly every request: 52 topics asked for by 20 processes every 30 s cost a fifth of
    a name server's time.) One computation per topic runs at a time; the requests arriving meanwhile are served its
    outcome. Thread-safe (sync routes run in a thread pool).
    """

    def __init__(self, max_age_s: float = MAX_AGE_S) -> None:
        self.max_age_s = max_age_s
        self._routes: dict[str, tuple[float, TopicRoute]] = {}  # topic -> (until when it serves, monotonic; route)
        self._flights: dict[str, _Flight] = {}  # topic -> its computation in progress
        self._generation = 0  # counts the drops: a route computed across one is not kept
        self._lock = threading.Lock()

    def changed(self, keys: set[str] | None) -> None:
        if keys is None or not ROUTE_KEYS.isdisjoint(keys):
            with self._lock:
                self._generation += 1
                self._routes.clear()

    def get(self, topic: str, compute: Callable[[], tuple[TopicRoute, float]]) -> TopicRoute:
        """The cached route of ``topic``, else ``compute()``'s (the route and the seconds until its first broker
        lease ends; its errors propagate and are not cached). The requests arriving while it runs share its
        outcome, an error too: a failing database costs one computation's time per wave of requests, not one per
        request in turn."""
        route = self.cached(topic)
        if route is not None:
            return route
        with self._lock:
            flight = self._flights.get(topic)
            leads = flight is None
            if flight is None:
                flight = self._flights[topic] = _Flight(self._generation)
        if not leads:
            return flight.outcome()
        try:
            started = time.monotonic()
            route, lasts_s = compute()
            flight.route = route
            if any(b.replicas for b in route.brokers):
                lasts_s = min(lasts_s, REPLICAS_AGE_S)
            with self._lock:
                if flight.generation == self._generation:
                    self._routes[topic] = (started + min(lasts_s, self.max_age_s), route)
            return route
        except BaseException as exc:
            flight.error = exc
            raise
        finally:
            with self._lock:
                del self._flights[topic]
            flight.done.set()

    def cached(self, topic: str) -> TopicRoute | None:
        """The route of ``topic`` if one is cached and still holds (never blocks)."""
        entry = self._routes.get(topic)
        if entry is not None and time.monotonic() < entry[0]:
            return entry[1]
        return None


class _Flight:
    """One computation of a topic's route, and what the requests waiting for it get."""

    def __init__(self, generation: int) -> None:
        self.generation = generation
        self.done = threading.Event()
        self.route: TopicRoute | None = None
        self.error: BaseException | None = None

    def outcome(self) -> TopicRoute:
        self.done.wait()
        if self.error is not None:
            raise self.error
        assert self.route is not None
        return self.route
