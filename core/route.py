"""Topic routes from the name server and the queue sets they imply: base queues, and each lane's slot.

A route names which lane holds which slot (``lanes``); a slot no lane holds is free: nobody sends to it and nobody
consumes it (a slot is given back only after its lane drained). A route without a lane map (``lanes=None``: an
answer from before lanes) gives slot 0 to the ``gray`` lane, as today's gray queues.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from graymq.core.message_queue import MessageQueue
from graymq.core.queue_layout import GRAY_LANE, lane_weight_shares, lane_weighted_ids, slot_of_queue

PERM_READ = 4
PERM_WRITE = 2
FREE_SLOT = ""
"""``TopicRoute.lane_of`` of a queue in a slot no lane holds (never a lane's name: names are not empty)."""


@dataclass(frozen=True, slots=True)
class BrokerData:
    broker_name: str
    address: str
    queue_nums: int
    gray_queue_nums: int
    perm: int = 6
    replicas: int = 0  # a broker set's replicas (``address`` is its leader's); 0: a single copy
    lane_slots: int = 1  # lane slots of gray_queue_nums queues each (``queue_nums`` counts them all)


@dataclass(frozen=True, slots=True)
class TopicRoute:
    topic: str
    brokers: tuple[BrokerData, ...]
    lanes: tuple[tuple[str, int], ...] | None = None  # (lane, slot) pairs, sorted; None: slot 0 is ``gray``'s
    _addresses: dict[str, str] = field(init=False, repr=False, compare=False, hash=False)
    _by_name: dict[str, BrokerData] = field(init=False, repr=False, compare=False, hash=False)
    _slot_lanes: dict[int, str] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_addresses", {b.broker_name: b.address for b in self.brokers})
        object.__setattr__(self, "_by_name", {b.broker_name: b for b in self.brokers})
        lanes = {GRAY_LANE: 0} if self.lanes is None else dict(self.lanes)
        object.__setattr__(self, "_slot_lanes", {slot: lane for lane, slot in lanes.items()})

    @staticmethod
    def lane_pairs(lanes: Mapping[str, int] | None) -> tuple[tuple[str, int], ...] | None:
        """A lane map (lane -> slot) as the route keeps it."""
        return None if lanes is None else tuple(sorted((str(k), int(v)) for k, v in lanes.items()))

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> TopicRoute:
        brokers = tuple(sorted(
            (BrokerData(b["broker_name"], b["address"], int(b["queue_nums"]), int(b.get("gray_queue_nums", 0)),
                        int(b.get("perm", 6)), len(b.get("replicas") or ()), int(b.get("lane_slots") or 1))
             for b in raw["brokers"]),
            key=lambda b: b.broker_name,
        ))
        return cls(raw["topic"], brokers, cls.lane_pairs(raw.get("lanes")))

    def broker(self, broker_name: str) -> BrokerData | None:
        return self._by_name.get(broker_name)

    def address_of(self, broker_name: str) -> str | None:
        return self._addresses.get(broker_name)

    def queues(self, *, writable: bool = False, readable: bool = False) -> list[MessageQueue]:
        """Every queue of the topic, by broker then id."""
        return [
            MessageQueue(self.topic, b.broker_name, q)
            for b in self.brokers
            if (not writable or b.perm & PERM_WRITE) and (not readable or b.perm & PERM_READ)
            for q in range(b.queue_nums)
        ]

    def slot_of(self, mq: MessageQueue) -> int | None:
        """The lane slot ``mq`` belongs to; None for a base queue (or a broker not in the route)."""
        broker = self.broker(mq.broker_name)
        if broker is None or not 0 <= mq.queue_id < broker.queue_nums:
            return None
        return slot_of_queue(mq.queue_id, broker.queue_nums, broker.gray_queue_nums, broker.lane_slots)

    def lane_of(self, mq: MessageQueue) -> str | None:
        """The lane whose slot holds ``mq``; None for a base queue; ``FREE_SLOT`` in a slot no lane holds."""
        slot = self.slot_of(mq)
        return None if slot is None else self._slot_lanes.get(slot, FREE_SLOT)

    def slot_of_lane(self, lane: str) -> int | None:
        """The slot ``lane`` holds on this topic; None when it holds none."""
        return next((slot for slot, name in self._slot_lanes.items() if name == lane), None)

    def is_gray(self, mq: MessageQueue) -> bool:
        """Whether ``mq`` is in a lane slot (held or free): not a base queue."""
        return self.slot_of(mq) is not None

    def is_weighted(self, mq: MessageQueue, weight: int) -> bool:
        """Whether ``mq`` is one of the normal queues a gray side with ``weight`` percent consumes (per broker,
        as the broker computes it)."""
        broker = self.broker(mq.broker_name)
        return broker is not None and mq.queue_id in lane_weighted_ids(broker.queue_nums, broker.gray_queue_nums,
                                                                       broker.lane_slots, weight)

    def weighted_lane(self, mq: MessageQueue, weights: tuple[tuple[str, int], ...]) -> str | None:
        """The lane whose weight (``weights``: (lane, percent) pairs) gives it the base queue ``mq``
        (``core.queue_layout.lane_weight_shares``, per broker as the broker computes it); None: no lane's."""
        broker = self.broker(mq.broker_name)
        if broker is None or not weights:
            return None
        return lane_weight_shares(broker.queue_nums, broker.gray_queue_nums, broker.lane_slots,
                                  weights).get(mq.queue_id)

    def split(self, queues: list[MessageQueue]) -> tuple[list[MessageQueue], list[MessageQueue]]:
        """(gray, normal) partition of ``queues`` by this route's layout."""
        gray = [mq for mq in queues if self.is_gray(mq)]
        normal = [mq for mq in queues if not self.is_gray(mq)]
        return gray, normal

    def gray_queue_nums(self, broker_name: str) -> int:
        broker = self.broker(broker_name)
        return broker.gray_queue_nums if broker else 0
