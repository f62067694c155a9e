"""A lane's first send to a topic: the name server gives the lane a slot of it, then the route says which.

A lane takes a slot of a topic when its first client or message appears (docs/lanes.md). A producer whose route
gives its send's lane no slot (``LaneSlotError`` from the selector) asks for one here and reads the route again;
a topic whose slots are all held refuses with the name server's one line, which the send raises. A consumer put in a
lane by a flag or rule learns it from a watch, which takes no slot: it takes them (``hold_slots``) before it
rebalances, so its lane's queues are in its routes. A topic a consumer reports later (its group's retry topic, made
by the brokers after its first heartbeat) gets its slot from the name server's heartbeat, which takes the slot of
every topic the client reports; the answer names the slots (``topic_lanes``), and ``refresh_behind`` reads again
the routes that do not name them yet, once for all the consumers sharing the routes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Protocol

from graymq.core.route import TopicRoute
from graymq.protocol.errors import GrayMQError, LaneSlotError

log = logging.getLogger(__name__)


class LaneSlots(Protocol):
    async def take_lane_slot(self, topic: str, lane: str) -> object: ...


class Routes(Protocol):
    async def get(self, topic: str, *, refresh: bool = False) -> TopicRoute: ...

    def cached(self, topic: str) -> TopicRoute | None: ...


async def route_with_slot(nameserver: LaneSlots, routes: Routes, missing: LaneSlotError) -> TopicRoute:
    """The route of ``missing.topic`` once ``missing.lane`` holds a slot of it."""
    await nameserver.take_lane_slot(missing.topic, missing.lane)
    route = await routes.get(missing.topic, refresh=True)
    if route.slot_of_lane(missing.lane) is None:
        raise missing
    return route


async def hold_slots(nameserver: LaneSlots, routes: Routes, topics: Iterable[str], lane: str) -> None:
    """``lane`` holds a slot of each of ``topics`` that has lane slots, and the routes say so; a refusal is logged
    (the client holds no queue of the lane there until a slot is given back or the topic grows)."""
    for topic in topics:
        try:
            route = await routes.get(topic)
            if route.slot_of_lane(lane) is None and any(b.gray_queue_nums for b in route.brokers):
                await route_with_slot(nameserver, routes, LaneSlotError(topic, lane))
        except GrayMQError as exc:
            log.warning("lane %s has no slot of topic %s: %s", lane, topic, exc.message)


def routes_behind(routes: Routes, topic_lanes: Mapping[str, Mapping[str, int]], lane: str | None) -> list[str]:
    """The topics whose cached route does not give ``lane`` the slot a name server answer says it holds
    (``topic_lanes``: topic -> lane -> slot, every lane holding one); for a base client (``lane`` None), those whose
    route names other slots than the answer for any lane: it adopts the queues of a lane left without clients, and
    a slot its route calls free is nobody's. A topic without a cached route is read fresh at its first use."""
    behind = []
    for topic, lanes in sorted(topic_lanes.items()):
        route = routes.cached(topic)
        if route is None:
            continue
        if lane is None:
            if route.lanes is not None and dict(route.lanes) != lanes:
                behind.append(topic)
        elif lane in lanes and route.slot_of_lane(lane) != lanes[lane]:
            behind.append(topic)
    return behind


async def refresh_behind(routes: Routes, topic_lanes: Mapping[str, Mapping[str, int]], lane: str | None) -> bool:
    """Read again the routes ``routes_behind`` names (clients sharing ``routes`` share each read); whether any
    changed. A failed read is logged: the next answer names the topic again."""
    changed = False
    for topic in routes_behind(routes, topic_lanes, lane):
        before = routes.cached(topic)
        try:
            changed = await routes.get(topic, refresh=True) != before or changed
        except GrayMQError as exc:
            log.debug("route of %s not read again: %s", topic, exc.message)
    return changed
