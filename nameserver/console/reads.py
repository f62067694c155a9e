"""What the console pages show, read from the database through the name server's services and, for offsets, from
the brokers.

Offsets are read with the caller's own bearer token (the brokers accept an admin principal, and a principal with
the group's consume right): the console sees no more than its user may. A broker that does not answer leaves its
cells without offsets and says why; it never fails the page.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool

from graymq.nameserver.console.drain import DrainProgress, DrainWatch
from graymq.nameserver.console.lane_view import (
    LaneColumn,
    LaneCount,
    TopicSlots,
    lane_columns,
    lane_counts,
    lane_in,
    slot_use,
)
from graymq.nameserver.console.queue_map import QueueMap, QueueOffsets, build_queue_map, owners_by_queue
from graymq.nameserver.errors import NotFound
from graymq.nameserver.schemas import (
    AuditView,
    ClientCount,
    ClientView,
    CutoverView,
    GroupClients,
    GroupDetail,
    GroupLaneView,
    TopicRoute,
)
from graymq.nameserver.services.audit import AuditService
from graymq.nameserver.services.clients import ClientService
from graymq.nameserver.services.cutovers import CutoverService
from graymq.nameserver.services.groups import GroupService
from graymq.nameserver.services.lanes import LaneService
from graymq.nameserver.services.registry import RegistryService
from graymq.nameserver.settings import NameServerSettings
from graymq.protocol.broker_client import BrokerClient
from graymq.protocol.errors import GrayMQError

CONSUMING_ROLES = ("consumer", "spark")
BROKER_TIMEOUT_S = 2.0
RECENT_AUDIT = 12
RECENT_OPERATIONS = 5
CLIENTS_PAGE = 50  # rows of a group page's client table


@dataclass(frozen=True)
class ClientPage:
    """One page of a group's client table (``number`` of ``pages``, by client id and role), with the count of
    every live client per role and side (``counts``, from the database's GROUP BY, not the page)."""

    number: int
    pages: int
    offset: int
    clients: list[ClientView]
    total: int
    counts: list[ClientCount]


def client_page(clients: GroupClients, number: int) -> ClientPage:
    """Page ``number`` (1-based; one past the last shows the last) of ``clients``.

    >>> page = client_page(GroupClients(group="G", gray_switch=True, orphan_policy="hold", gray_weight=0, clients=[],
    ...                                 total=0, counts=[]), 3)
    >>> page.number, page.pages, page.offset
    (1, 1, 0)
    """
    pages = max(-(-len(clients.clients) // CLIENTS_PAGE), 1)
    number = min(max(number, 1), pages)
    offset = (number - 1) * CLIENTS_PAGE
    return ClientPage(number, pages, offset, clients.clients[offset:offset + CLIENTS_PAGE], clients.total,
                      clients.counts)


@dataclass
class GroupPage:
    detail: GroupDetail
    clients: list[ClientView]  # every live client: the queue map, lanes and drain count them all
    client_page: ClientPage  # what the client table shows
    queue_map: QueueMap
    audit: list[AuditView]
    operations: list[CutoverView]
    drain: DrainProgress | None = None  # of the running operation, if there is one
    lanes: list[LaneColumn] = field(default_factory=list)  # base and each lane, side by side; none: no lane but gray
    slots: list[TopicSlots] = field(default_factory=list)  # which lane holds which slot of the group's topics


@dataclass
class GroupRow:
    """One line of the groups page."""

    detail: GroupDetail
    base_clients: int
    lanes: list[LaneCount]  # gray first, then the other lanes by name


@dataclass
class _Stored:
    """A group as the database holds it, and the routes of its consumers' topics (or why there is none)."""

    detail: GroupDetail
    clients: GroupClients
    routes: dict[str, TopicRoute | str]


class ConsoleReader:
    """Reads for one request: ``token`` is the caller's bearer token (empty: none), forwarded to the brokers."""

    def __init__(self, sessions: sessionmaker[Session], settings: NameServerSettings, token: str,
                 drains: DrainWatch) -> None:
        self.sessions = sessions
        self.settings = settings
        self.token = token
        self.drains = drains  # the app's: what each running operation's drain started from

    # -- pages -------------------------------------------------------------------------------
    async def group_page(self, group: str, clients_page: int = 1) -> GroupPage:
        """404 (``NotFound``) for a group the name server does not know; ``clients_page``: the client table's page."""

        def read() -> tuple[_Stored, list[AuditView], list[CutoverView], list[CutoverView], list[GroupLaneView]]:
            with self.sessions() as session:
                stored = self._stored(session, group)
                audit = AuditService(session).query(group=group, object_type=None, object_id=None,
                                                    limit=RECENT_AUDIT)
                cutovers = CutoverService(session)
                operations = cutovers.of_group(group, None)[:RECENT_OPERATIONS]
                lanes = LaneService(session, self.settings).lanes_of(group)
                return stored, audit, operations, cutovers.of_group(group, "RUNNING"), lanes

        stored, audit, operations, running_ops, lanes = await run_in_threadpool(read)
        qmap = await self._queue_map(group, stored)
        page = GroupPage(stored.detail, stored.clients.clients, client_page(stored.clients, clients_page), qmap, audit,
                         operations)
        running = stored.detail.running_cutover
        if running is not None:
            in_lane = sum(c.lane == running.lane for c in page.clients if c.role in CONSUMING_ROLES)
            page.drain = self.drains.progress(running.id, qmap.backlog(running.lane), in_lane)
        page.lanes = lane_columns(page.clients, qmap, lanes, running_ops, self.drains)
        page.slots = slot_use(stored.routes, bool(page.lanes))
        return page

    async def group_state(self, group: str) -> tuple[GroupDetail, list[ClientView], QueueMap]:
        """A group's settings, clients and queue map (what an action's preview needs)."""
        stored = await run_in_threadpool(self._read_stored, group)
        return stored.detail, stored.clients.clients, await self._queue_map(group, stored)

    async def groups(self) -> list[GroupRow]:
        def read() -> list[_Stored]:
            with self.sessions() as session:
                return [self._stored(session, g.group) for g in GroupService(session, self.settings).all()]

        rows = []
        for stored in await run_in_threadpool(read):
            clients = stored.clients.clients
            qmap = await self._queue_map(stored.detail.group, stored, gray_only=True)
            rows.append(GroupRow(stored.detail, sum(lane_in(c) is None for c in clients), lane_counts(clients, qmap)))
        return rows

    def operations(self, limit: int = 100) -> list[CutoverView]:
        """Every group's operations, newest first."""
        with self.sessions() as session:
            operations = [op for g in GroupService(session, self.settings).all()
                          for op in CutoverService(session).of_group(g.group, None)]
        return sorted(operations, key=lambda op: op.started_at, reverse=True)[:limit]

    def audit(self, group: str | None, object_type: str | None, object_id: str | None,
              limit: int) -> list[AuditView]:
        with self.sessions() as session:
            return AuditService(session).query(group=group, object_type=object_type, object_id=object_id,
                                               limit=limit)

    # -- parts -------------------------------------------------------------------------------
    def _read_stored(self, group: str) -> _Stored:
        with self.sessions() as session:
            return self._stored(session, group)

    def _stored(self, session: Session, group: str) -> _Stored:
        detail = GroupService(session, self.settings).detail(group)
        clients = ClientService(session, self.settings).group_clients(group)
        registry = RegistryService(session, self.settings)
        routes: dict[str, TopicRoute | str] = {}
        for topic in sorted(_topics(clients.clients)):
            try:
                routes[topic] = registry.route(topic)
            except NotFound as exc:
                routes[topic] = str(exc)
        return _Stored(detail, clients, routes)

    async def _queue_map(self, group: str, stored: _Stored, gray_only: bool = False) -> QueueMap:
        """The map with offsets; ``gray_only``: asks only the brokers holding gray queues."""
        wanted = [(b.broker_name, b.address, topic) for topic, route in stored.routes.items()
                  if isinstance(route, TopicRoute) for b in route.brokers if b.gray_queue_nums or not gray_only]
        brokers = BrokerClient(timeout_s=BROKER_TIMEOUT_S, token=self.token)
        try:
            answers = await asyncio.gather(*(_offsets(brokers, address, group, topic) for _, address, topic in wanted))
        finally:
            await brokers.close()
        offsets = {(name, topic): answer for (name, _, topic), answer in zip(wanted, answers, strict=True)}
        return build_queue_map(stored.routes, owners_by_queue(stored.clients.clients), offsets)


def _topics(clients: Iterable[ClientView]) -> set[str]:
    """The topics the group's consumers subscribe, and those of the queues any of its clients reports."""
    topics = {t for c in clients if c.role in CONSUMING_ROLES for t in c.topics}
    return topics | {q.split(":")[1] for c in clients for q in c.queues if q.count(":") >= 2}


async def _offsets(brokers: BrokerClient, address: str, group: str, topic: str) -> dict[int, QueueOffsets] | str:
    try:
        queues: list[Any] = await brokers.group_backlog(address, group, topic)
    except (GrayMQError, OSError) as exc:
        return f"offsets unavailable: {getattr(exc, 'message', None) or exc}"
    return {q.queue_id: QueueOffsets(q.consumer_offset, q.min_offset, q.max_offset) for q in queues}
