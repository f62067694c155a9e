"""Gray backlog of a group: unconsumed messages in the gray queues (every lane slot, or one lane's) of its
topics, read from every broker.

One implementation shared by the consumer's drain, ``graymq gray status`` and the controller.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from graymq.client.message import MessageQueue
from graymq.client.route_cache import Routes
from graymq.core.route import FREE_SLOT, TopicRoute
from graymq.protocol.broker_client import BrokerClient
from graymq.protocol.errors import GrayMQError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class QueueBacklog:
    topic: str
    broker_name: str
    queue_id: int
    consumer_offset: int  # -1: never committed
    max_offset: int       # includes delayed retries not yet delivered to this queue
    backlog: int


@dataclass(frozen=True, slots=True)
class UnavailableBroker:
    """A broker of the routes that did not answer: the backlog of ``queues`` (those asked about) is unknown."""

    broker_name: str
    address: str
    error: str
    queues: tuple[MessageQueue, ...]


class BacklogUnavailable(GrayMQError):
    """A broker holding queues asked about could not be asked; their backlog is unknown (unknown is not zero).

    ``brokers`` says which and why, so a wait can hold on it and tell the operator what it waits for."""

    retriable = True

    def __init__(self, brokers: Sequence[UnavailableBroker]) -> None:
        self.brokers = tuple(brokers)
        super().__init__("backlog unavailable: " + "; ".join(
            f"broker {b.broker_name} ({b.address}) did not answer: {b.error}" for b in self.brokers))


@dataclass
class Backlogs:
    """What the brokers that answered said, and the brokers that did not."""

    queues: list[QueueBacklog] = field(default_factory=list)
    unavailable: list[UnavailableBroker] = field(default_factory=list)

    def complete(self) -> list[QueueBacklog]:
        """The queues, when every broker answered; else ``BacklogUnavailable``."""
        if self.unavailable:
            raise BacklogUnavailable(self.unavailable)
        return self.queues


async def gray_backlog(brokers: BrokerClient, routes: Routes, group: str, topics: Iterable[str],
                       lane: str | None = None) -> list[QueueBacklog]:
    """Per gray queue of ``topics`` on every broker (``lane``: per queue of that lane's slot): what ``group`` has
    not consumed yet.

    Raises ``BacklogUnavailable`` when a broker does not answer (unknown is not zero).
    Topics without a route (not created yet) have no backlog.
    """
    return (await read_backlogs(brokers, routes, group, topics, gray_only=True, lane=lane)).complete()


async def queue_backlogs(brokers: BrokerClient, routes: Routes, group: str, topics: Iterable[str],
                         gray_only: bool = False) -> list[QueueBacklog]:
    """Per queue of ``topics`` on every broker (``gray_only``: per gray queue): what ``group`` has not consumed.

    Raises ``BacklogUnavailable`` when a broker does not answer."""
    return (await read_backlogs(brokers, routes, group, topics, gray_only)).complete()


async def read_backlogs(brokers: BrokerClient, routes: Routes, group: str, topics: Iterable[str],
                        gray_only: bool = False, lane: str | None = None) -> Backlogs:
    """Per queue of ``topics`` (``gray_only``: per gray queue, ``lane`` too: per queue of that lane's slot): what
    ``group`` has not consumed, from every broker that answers, and the brokers that do not (never raised).

    The brokers are asked side by side, each about its topics in turn; one that fails is asked nothing more (a dead
    broker costs one connection attempt, not one per topic), and the routes of its topics are refreshed at their
    next use (a broker gone from the name server leaves them soon).
    """
    asked: dict[str, list[tuple[str, str, list[int]]]] = {}  # address -> (topic, broker name, queue ids)
    for topic in sorted(set(topics)):
        try:
            route = await routes.get(topic)
        except GrayMQError as exc:
            log.debug("no route for %s: %s", topic, exc.message)
            continue
        for broker in route.brokers:
            ids = [q for q in range(broker.queue_nums)
                   if not gray_only or _in_side(route, MessageQueue(topic, broker.broker_name, q), lane)]
            if ids:
                asked.setdefault(broker.address, []).append((topic, broker.broker_name, sorted(ids)))
    result = Backlogs()
    for queues, unavailable in await asyncio.gather(*(_ask(brokers, group, address, work)
                                                      for address, work in asked.items())):
        result.queues += queues
        if unavailable is not None:
            result.unavailable.append(unavailable)
            for topic in {mq.topic for mq in unavailable.queues}:
                routes.invalidate(topic)
    result.queues.sort(key=lambda q: (q.topic, q.broker_name, q.queue_id))
    return result


def _in_side(route: TopicRoute, mq: MessageQueue, lane: str | None) -> bool:
    """Whether ``mq`` is a gray queue (``lane``: of that lane's slot, or of a slot the route says is free: those are
    empty, and a route read before the lane took its slot shows it free, so it is counted rather than missed)."""
    return route.slot_of(mq) is not None if lane is None else route.lane_of(mq) in (lane, FREE_SLOT)


async def _ask(brokers: BrokerClient, group: str, address: str,
               work: list[tuple[str, str, list[int]]]) -> tuple[list[QueueBacklog], UnavailableBroker | None]:
    """One broker's backlog of each (topic, broker name, queue ids) in turn, until it fails."""
    result: list[QueueBacklog] = []
    for index, (topic, broker_name, ids) in enumerate(work):
        try:
            queues = await brokers.group_backlog(address, group, topic)
        except GrayMQError as exc:
            unknown = tuple(MessageQueue(t, name, q) for t, name, qids in work[index:] for q in qids)
            return result, UnavailableBroker(broker_name, address, exc.message, unknown)
        wanted = set(ids)
        for q in queues:
            if q.queue_id in wanted:
                start = max(q.consumer_offset, q.min_offset) if q.consumer_offset >= 0 else q.min_offset
                result.append(QueueBacklog(topic, broker_name, q.queue_id, q.consumer_offset, q.max_offset,
                                           max(0, q.max_offset - start)))
    return result, None
