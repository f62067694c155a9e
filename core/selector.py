"""GrayQueueSelector: which queue a message goes to — inside its lane's slot or the base set of the route.

A send's side is ``False``/``None`` (base), ``True`` (the ``gray`` lane) or a lane's name.
"""

from __future__ import annotations

import itertools
import logging
import random
import zlib

from graymq.core.message_queue import MessageQueue
from graymq.core.queue_layout import GRAY_LANE
from graymq.core.route import TopicRoute
from graymq.protocol.errors import LaneSlotError, NoPermissionError

Side = bool | str | None
"""A send's side: ``False``/``None`` base, ``True`` the ``gray`` lane, else a lane's name."""


def side_lane(side: Side) -> str | None:
    """The lane a side names (None: base).

    >>> side_lane(True), side_lane(False), side_lane("v3"), side_lane(None)
    ('gray', None, 'v3', None)
    """
    if side is True:
        return GRAY_LANE
    return side or None

log = logging.getLogger(__name__)


class GrayQueueSelector:
    """Round robin inside the message's set, or by sharding key for ordered messages.

    Gray messages go to the gray queues (first/last of each broker), normal ones to the
    rest; with the gray switch off every queue is normal. A retry avoids the broker that
    just failed when the set has another one.
    """

    def __init__(self) -> None:
        self._counter = itertools.count(random.randrange(1 << 16))
        self._warned: set[str] = set()

    def candidates(self, route: TopicRoute, gray: Side, gray_switch: bool) -> list[MessageQueue]:
        """The writable queues a send of side ``gray`` may take: its lane's slot, else the base queues (all of
        them with the switch off). ``LaneSlotError`` when the topic has lane slots but the lane holds none."""
        writable = route.queues(writable=True)
        if not writable:
            raise NoPermissionError(f"topic {route.topic} has no writable queue on any broker")
        if not gray_switch:
            return writable
        lane = side_lane(gray)
        normal_set = [mq for mq in writable if route.slot_of(mq) is None]
        if lane is None:
            return normal_set or writable
        if len(normal_set) == len(writable):
            if route.topic not in self._warned:
                self._warned.add(route.topic)
                log.warning("topic %s has no gray queues; gray messages go to normal queues", route.topic)
            return normal_set
        lane_set = [mq for mq in writable if route.lane_of(mq) == lane]
        if not lane_set:
            raise LaneSlotError(route.topic, lane)
        return lane_set

    def select(self, route: TopicRoute, gray: Side, *, gray_switch: bool = True, last_broker: str | None = None,
               sharding_key: str | None = None) -> MessageQueue:
        queues = self.candidates(route, gray, gray_switch)
        if sharding_key is not None:
            return queues[zlib.crc32(sharding_key.encode()) % len(queues)]
        for _ in range(len(queues)):
            mq = queues[next(self._counter) % len(queues)]
            if mq.broker_name != last_broker:
                return mq
        return queues[next(self._counter) % len(queues)]


class MemoSelector(GrayQueueSelector):
    """``GrayQueueSelector`` with each route's candidate queues computed once, not at every send.

    Routes are immutable and a refresh makes a new object, so the memo is keyed by the route
    object (held, so its id cannot be reused) and the flags that choose the set.
    """

    def __init__(self) -> None:
        super().__init__()
        self._memo: dict[tuple[int, Side, bool], tuple[TopicRoute, list[MessageQueue]]] = {}

    def candidates(self, route: TopicRoute, gray: Side, gray_switch: bool) -> list[MessageQueue]:
        key = (id(route), gray, gray_switch)
        hit = self._memo.get(key)
        if hit is not None and hit[0] is route:
            return hit[1]
        queues = super().candidates(route, gray, gray_switch)
        if len(self._memo) >= 256:  # old routes: drop them all, the live ones come back at once
            self._memo.clear()
        self._memo[key] = (route, queues)
        return queues
