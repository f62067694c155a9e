"""Gray backlog of a group: unconsumed messages in the gray queues of its topics, read from every broker.

One implementation shared by the consumer's drain, ``graymq gray status`` and the controller.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from graymq.client.broker_client import BrokerClient
from graymq.client.route_cache import Routes
from graymq.protocol.errors import GrayMQError
from graymq.protocol.gray import gray_queue_ids

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class QueueBacklog:
    topic: str
    broker_name: str
    queue_id: int
    consumer_offset: int  # -1: never committed
    max_offset: int       # includes delayed retries not yet delivered to this queue
    backlog: int


class BacklogUnavailable(GrayMQError):
    """A broker holding gray queues could not be asked; the backlog is unknown."""

    retriable = True


async def gray_backlog(brokers: BrokerClient, routes: Routes, group: str,
                       topics: Iterable[str]) -> list[QueueBacklog]:
    """Per gray queue of ``topics`` on every broker: what ``group`` has not consumed yet.

    Raises ``BacklogUnavailable`` when a broker does not answer (unknown is not zero).
    Topics without a route (not created yet) have no backlog.
    """
    return await queue_backlogs(brokers, routes, group, topics, gray_only=True)


async def queue_backlogs(brokers: BrokerClient, routes: Routes, group: str, topics: Iterable[str],
                         gray_only: bool = False) -> list[QueueBacklog]:
    """Per queue of ``topics`` on every broker (``gray_only``: per gray queue): what ``group`` has not consumed."""
    result = []
    for topic in sorted(set(topics)):
        try:
            route = await routes.get(topic)
        except GrayMQError as exc:
            log.debug("no route for %s: %s", topic, exc.message)
            continue
        for broker in route.brokers:
            gray_ids = set(gray_queue_ids(broker.queue_nums, broker.gray_queue_nums))
            if gray_only and not gray_ids:
                continue
            try:
                queues = await brokers.group_backlog(broker.address, group, topic)
            except GrayMQError as exc:
                raise BacklogUnavailable(f"backlog of {topic} on {broker.broker_name} unavailable: {exc.message}") \
                    from exc
            for q in queues:
                if q.queue_id in gray_ids or not gray_only:
                    start = max(q.consumer_offset, q.min_offset) if q.consumer_offset >= 0 else q.min_offset
                    result.append(QueueBacklog(topic, broker.broker_name, q.queue_id, q.consumer_offset,
                                               q.max_offset, max(0, q.max_offset - start)))
    return result
