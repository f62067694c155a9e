"""Topic routes from the name server and the gray/normal queue sets they imply."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from graymq.core.message_queue import MessageQueue
from graymq.core.queue_layout import gray_queue_ids, weighted_queue_ids

PERM_READ = 4
PERM_WRITE = 2


@dataclass(frozen=True, slots=True)
class BrokerData:
    broker_name: str
    address: str
    queue_nums: int
    gray_queue_nums: int
    perm: int = 6
    replicas: int = 0  # a broker set's replicas (``address`` is its leader's); 0: a single copy


@dataclass(frozen=True, slots=True)
class TopicRoute:
    topic: str
    brokers: tuple[BrokerData, ...]
    _addresses: dict[str, str] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_addresses", {b.broker_name: b.address for b in self.brokers})

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> TopicRoute:
        brokers = tuple(sorted(
            (BrokerData(b["broker_name"], b["address"], int(b["queue_nums"]), int(b.get("gray_queue_nums", 0)),
                        int(b.get("perm", 6)), len(b.get("replicas") or ())) for b in raw["brokers"]),
            key=lambda b: b.broker_name,
        ))
        return cls(raw["topic"], brokers)

    def broker(self, broker_name: str) -> BrokerData | None:
        return next((b for b in self.brokers if b.broker_name == broker_name), None)

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

    def is_gray(self, mq: MessageQueue) -> bool:
        broker = self.broker(mq.broker_name)
        return broker is not None and mq.queue_id in gray_queue_ids(broker.queue_nums, broker.gray_queue_nums)

    def is_weighted(self, mq: MessageQueue, weight: int) -> bool:
        """Whether ``mq`` is one of the normal queues a gray side with ``weight`` percent consumes (per broker,
        as the broker computes it)."""
        broker = self.broker(mq.broker_name)
        return broker is not None and mq.queue_id in weighted_queue_ids(broker.queue_nums, broker.gray_queue_nums,
                                                                         weight)

    def split(self, queues: list[MessageQueue]) -> tuple[list[MessageQueue], list[MessageQueue]]:
        """(gray, normal) partition of ``queues`` by this route's layout."""
        gray = [mq for mq in queues if self.is_gray(mq)]
        normal = [mq for mq in queues if not self.is_gray(mq)]
        return gray, normal

    def gray_queue_nums(self, broker_name: str) -> int:
        broker = self.broker(broker_name)
        return broker.gray_queue_nums if broker else 0
