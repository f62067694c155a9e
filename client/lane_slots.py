"""A lane's first send to a topic: the name server gives the lane a slot of it, then the route says which.

A lane takes a slot of a topic when its first client or message appears (docs/lanes.md). A producer whose route
gives its send's lane no slot (``LaneSlotError`` from the selector) asks for one here and reads the route again;
a topic whose slots are all held refuses with the name server's one line, which the send raises.
"""

from __future__ import annotations

from typing import Protocol

from graymq.core.route import TopicRoute
from graymq.protocol.errors import LaneSlotError


class LaneSlots(Protocol):
    async def take_lane_slot(self, topic: str, lane: str) -> object: ...


class Routes(Protocol):
    async def get(self, topic: str, *, refresh: bool = False) -> TopicRoute: ...


async def route_with_slot(nameserver: LaneSlots, routes: Routes, missing: LaneSlotError) -> TopicRoute:
    """The route of ``missing.topic`` once ``missing.lane`` holds a slot of it."""
    await nameserver.take_lane_slot(missing.topic, missing.lane)
    route = await routes.get(missing.topic, refresh=True)
    if route.slot_of_lane(missing.lane) is None:
        raise missing
    return route
