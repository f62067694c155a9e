"""MessageQueue: one queue of a topic on one broker, the unit every release rule hands out."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True, slots=True)
class MessageQueue:
    """``broker_name:topic:queue_id``; ordered so allocations sort the same on every client.

    >>> str(MessageQueue("ORDERS", "broker-a", 5))
    'broker-a:ORDERS:5'
    """

    topic: str
    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        return f"{self.broker_name}:{self.topic}:{self.queue_id}"
