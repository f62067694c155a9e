"""A consumer group as the controller sees it: clients with flags and states, the gray backlog, and the normal
queues its gray side holds through the group's weight.

Clients the name server reports stale (no heartbeat for ``GRAYMQ_CLIENT_STALE_SECONDS``: killed,
partitioned, paused) are kept apart in ``stale``: promote and rollback do not wait for stale
consumers (they wait for stale gray producers, see ``cutover``); their topics still count for the
gray backlog. The JSON shape lists every client in ``clients`` with a ``stale`` mark, and the
stale ones again in ``stale_clients``.

A broker that does not answer makes ``status`` raise ``BacklogUnavailable`` (naming it: the waits of promote,
rollback and rollout hold on it), or, with ``partial`` (``graymq gray status``, the operator's view), marks it: the
status shows what the others answered, lists it in ``unavailable``, and every figure that depends on it is unknown
(``None`` in JSON: ``gray_backlog``, a side's ``lag``, the offsets of its gray queues, listed with
``available: false``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from graymq.client.backlog import Backlogs, QueueBacklog, UnavailableBroker, read_backlogs
from graymq.client.message import MessageQueue
from graymq.client.route_cache import RouteCache
from graymq.core.queue_layout import GRAY_LANE
from graymq.core.route import FREE_SLOT, TopicRoute
from graymq.nameserver_api.client import NameServerClient, NotFoundError
from graymq.nameserver_api.records import ClientRecord, GroupClients, ReplicaSetRecord
from graymq.protocol.broker_client import BrokerClient
from graymq.protocol.errors import GrayMQError
from graymq.protocol.health import SIDES, add_up
from graymq.protocol.membership import ClientState

log = logging.getLogger(__name__)

CONSUMING_ROLES = ("consumer", "spark")


@dataclass(frozen=True, slots=True)
class WeightedQueue:
    """A normal queue a gray client holds: the group's weight gave it to the gray side."""

    client_id: str
    queue: MessageQueue


@dataclass(frozen=True)
class LaneStatus:
    """One lane of a group (docs/lanes.md): its live clients (``ID (ROLE)``), its queues on the group's topics, their
    backlog, the lag of what its consumers hold, whether the group takes part and what it does with the lane's
    queues no consumer of the lane serves. ``backlog`` and ``lag`` are None when a broker holding one of those
    queues did not answer."""

    lane: str
    clients: tuple[str, ...]
    queues: tuple[MessageQueue, ...]
    backlog: int | None
    lag: int | None
    taking_part: bool
    orphan_policy: str
    state: str  # consuming | draining | held | adopted | off: see ``lane_state``
    weight: int = 0  # percent of each topic's base queues the lane's consumers take (docs/lanes.md)

    def to_json(self) -> dict[str, Any]:
        return {"lane": self.lane, "clients": list(self.clients), "queues": [str(mq) for mq in self.queues],
                "backlog": self.backlog, "lag": self.lag, "taking_part": self.taking_part,
                "orphan_policy": self.orphan_policy, "state": self.state, "weight": self.weight}


def lane_state(switch: bool, consumer_states: Sequence[str], orphan_policy: str) -> str:
    """A lane in one word: ``off`` (the group's switch is off: its consumers consume every queue), ``draining`` (a
    consumer of the lane drains before leaving it), ``consuming`` (consumers of the lane serve its queues), else
    what the orphan policy does with them: ``held`` (they wait) or ``adopted`` (base consumers take them).

    >>> lane_state(True, ["GRAY"], "hold"), lane_state(True, [], "adopt"), lane_state(False, ["GRAY"], "hold")
    ('consuming', 'adopted', 'off')
    """
    if not switch:
        return "off"
    if ClientState.DRAINING in consumer_states:
        return "draining"
    if consumer_states:
        return "consuming"
    return "adopted" if orphan_policy == "adopt" else "held"


@dataclass
class GroupStatus:
    group: str
    gray_switch: bool
    orphan_policy: str
    clients: list[ClientRecord]
    queues: list[QueueBacklog] = field(default_factory=list)
    stale: list[ClientRecord] = field(default_factory=list)
    gray_weight: int = 0
    gray_retired: bool = False
    weighted: list[WeightedQueue] = field(default_factory=list)
    lag: dict[str, int | None] | None = None  # per side: what the queues each side holds have not consumed
    broker_sets: list[ReplicaSetRecord] = field(default_factory=list)  # the replicated brokers of its topics
    unavailable: list[UnavailableBroker] = field(default_factory=list)  # brokers that did not answer (``partial``)
    unknown_gray: list[MessageQueue] = field(default_factory=list)  # their gray queues: backlog unknown
    lane: str | None = None  # the lane whose clients and backlog these are (None: every lane's)
    lanes: list[LaneStatus] | None = None  # each lane of the group (``GroupInspector.lane_statuses``); None: not read

    @property
    def gray_backlog(self) -> int:
        """The gray backlog on the brokers that answered (all of it unless ``unknown_gray``)."""
        return sum(q.backlog for q in self.queues)

    def gray_clients(self, roles: tuple[str, ...] = CONSUMING_ROLES) -> list[ClientRecord]:
        """The live clients of ``roles`` in a lane (in ``lane``, when the status is of one)."""
        return [c for c in self.clients if c.role in roles and c.gray and self.lane in (None, c.in_lane)]

    def retired_clients(self) -> list[ClientRecord]:
        return [c for c in self.clients if c.state == ClientState.RETIRED]

    def health(self) -> dict[str, dict[str, float]]:
        """The live consumers' health reports added up per side (``protocol.health``)."""
        return add_up(c.health for c in self.clients if c.role in CONSUMING_ROLES)

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group, "gray_switch": self.gray_switch, "orphan_policy": self.orphan_policy,
            "clients": sorted([_client_json(c, False) for c in self.clients]
                              + [_client_json(c, True) for c in self.stale],
                              key=lambda c: (c["role"], c["client_id"])),
            "gray_backlog": None if self.unknown_gray else self.gray_backlog,
            "gray_queues": sorted(
                [{"topic": q.topic, "broker": q.broker_name, "queue_id": q.queue_id,
                  "consumer_offset": q.consumer_offset, "max_offset": q.max_offset, "backlog": q.backlog,
                  "available": True} for q in self.queues]
                + [{"topic": mq.topic, "broker": mq.broker_name, "queue_id": mq.queue_id, "consumer_offset": None,
                    "max_offset": None, "backlog": None, "available": False} for mq in self.unknown_gray],
                key=lambda q: (q["topic"], q["broker"], q["queue_id"])),
            "gray_backlog_known": self.gray_backlog,
            "unavailable_brokers": [{"broker": b.broker_name, "address": b.address, "error": b.error,
                                     "topics": sorted({mq.topic for mq in b.queues})} for b in self.unavailable],
            "stale_clients": [_client_json(c, True) for c in self.stale],
            "gray_weight": self.gray_weight,
            "weighted_queues": [{"client_id": w.client_id, "topic": w.queue.topic, "broker": w.queue.broker_name,
                                 "queue_id": w.queue.queue_id} for w in self.weighted],
            "gray_retired": self.gray_retired,
            "health": self.health(),
            "lag": self.lag,
            "broker_sets": [rs.to_json() for rs in self.broker_sets],
        } | ({} if self.lanes is None else {"lanes": [lane.to_json() for lane in self.lanes]})


STATUS_CLIENT_KEYS = ("client_id", "role", "labels", "explicit_gray", "desired_gray", "gray", "state", "queues",
                      "topics", "last_seen", "health", "gray_marks", "principal")


def _client_json(client: ClientRecord, stale: bool) -> dict[str, Any]:
    """A client as ``graymq gray status --json`` lists it: the name server's keys it always showed, ``stale``."""
    shown = client.to_json()
    return {**{k: shown[k] for k in STATUS_CLIENT_KEYS}, "stale": stale}


class GroupInspector:
    """Reads a group's state from the name server and its gray backlog from the brokers."""

    def __init__(self, nameserver: NameServerClient) -> None:
        self.nameserver = nameserver
        self.routes = RouteCache(nameserver, ttl_s=5.0)
        # Reading backlogs is an operator's call: the admin token when there is one, else the client's own.
        self.brokers = BrokerClient(token=nameserver.admin_token or nameserver.token or "")

    async def close(self) -> None:
        await self.brokers.close()

    async def clients(self, group: str, role: str | None = None) -> GroupClients:
        """The name server's view; a group it never heard of has no clients."""
        try:
            return await self.nameserver.group_clients(group, role)
        except NotFoundError:
            return GroupClients.unknown(group)

    async def status(self, group: str, with_backlog: bool = True, with_weighted: bool = False,
                     with_lag: bool = False, partial: bool = False, lane: str | None = None,
                     gray_lane_only: bool = False) -> GroupStatus:
        """The group's clients; ``with_backlog``: and its gray backlog; ``with_weighted``: and the normal queues
        its live gray consumers hold; ``with_lag`` (and ``with_backlog``): the lag of each side; ``lane``: the
        gray clients and backlog of that lane only (a runbook's view). ``gray_lane_only``: the gray backlog and
        queues are the lane ``gray``'s (and free slots'), not every lane's, the lag still every lane's (the
        operator's view).

        A broker that does not answer raises ``BacklogUnavailable`` (naming every such broker); with ``partial``
        it is listed in ``unavailable`` instead, and the figures that depend on it are unknown."""
        data = await self.clients(group)
        listed = sorted(data.clients, key=lambda c: (c.role, c.client_id))
        status = GroupStatus(group, data.gray_switch, data.orphan_policy, [c for c in listed if not c.stale],
                             stale=[c for c in listed if c.stale], gray_weight=data.gray_weight,
                             gray_retired=data.gray_retired, lane=lane)
        if with_backlog:
            topics = {t for c in listed if c.role in CONSUMING_ROLES for t in c.topics}
            gray = await self._backlogs(group, topics, True, partial, lane)
            status.queues = gray.queues
            status.unknown_gray = sorted(mq for b in gray.unavailable for mq in b.queues)
            status.unavailable = gray.unavailable
            if with_lag:
                every = await self._backlogs(group, topics, False, partial)
                status.lag = side_lag(status, every.queues, [mq for b in every.unavailable for mq in b.queues])
                status.unavailable = _merged(gray.unavailable, every.unavailable)
                status.broker_sets = await self._broker_sets({q.broker_name for q in status.queues}
                                                             | {mq.broker_name for mq in await self._queues(topics)})
            if gray_lane_only:  # after the lag: its gray side is every lane's, as the health reports' side is
                await self._keep_gray_lane(status)
        if with_weighted and status.gray_switch:
            status.weighted = await self.weighted_queues(status.gray_clients())
        return status

    async def _backlogs(self, group: str, topics: set[str], gray_only: bool, partial: bool,
                        lane: str | None = None) -> Backlogs:
        backlogs = await read_backlogs(self.brokers, self.routes, group, topics, gray_only, lane)
        if not partial:
            backlogs.complete()
        return backlogs

    async def _keep_gray_lane(self, status: GroupStatus) -> None:
        """Leave out of the gray backlog the queues of slots another lane holds, and of free slots past the first
        (slot 0 free is today's gray queues before a gray client came: listed as before lanes)."""
        routes = {topic: await self._route(topic) for topic in {q.topic for q in status.queues}
                  | {mq.topic for mq in status.unknown_gray}}

        def in_gray(mq: MessageQueue) -> bool:
            route = routes.get(mq.topic)
            if route is None:
                return True
            lane = route.lane_of(mq)
            return lane == GRAY_LANE or (lane == FREE_SLOT and route.slot_of(mq) == 0)

        status.queues = [q for q in status.queues if in_gray(MessageQueue(q.topic, q.broker_name, q.queue_id))]
        status.unknown_gray = [mq for mq in status.unknown_gray if in_gray(mq)]

    async def lane_statuses(self, status: GroupStatus) -> list[LaneStatus]:
        """Each lane of the group as the name server lists it, with its queues, backlog and lag from the brokers
        (one read of every queue of the group's topics; a broker that does not answer makes its figures unknown).
        The lag of a lane: the backlog of the queues its consumers hold, and of its own queues nobody holds."""
        try:
            lanes = await self.nameserver.group_lanes(status.group)
        except NotFoundError:
            return []
        if not lanes:
            return []
        consumers = [c for c in status.clients if c.role in CONSUMING_ROLES]
        topics = {t for c in consumers + status.stale for t in c.topics}
        routes = {topic: route for topic in sorted(topics) if (route := await self._route(topic)) is not None}
        every = await read_backlogs(self.brokers, self.routes, status.group, topics)
        unknown = [mq for b in every.unavailable for mq in b.queues]
        holder = {text: c.in_lane for c in consumers if c.state != ClientState.RETIRED for text in c.queues}

        def layout_lane(mq: MessageQueue) -> str | None:
            route = routes.get(mq.topic)
            return None if route is None else route.lane_of(mq)

        def side(mq: MessageQueue) -> str | None:
            return holder.get(str(mq), layout_lane(mq))

        backlogs = [(MessageQueue(q.topic, q.broker_name, q.queue_id), q.backlog) for q in every.queues]
        result = []
        for lane in lanes:
            queues = tuple(sorted(mq for route in routes.values() for mq in route.queues()
                                  if route.lane_of(mq) == lane.lane))
            backlog = sum(n for mq, n in backlogs if layout_lane(mq) == lane.lane)
            lag = sum(n for mq, n in backlogs if side(mq) == lane.lane)
            states = [c.state for c in consumers if c.in_lane == lane.lane]
            result.append(LaneStatus(
                lane.lane, lane.clients, queues, None if any(mq in queues for mq in unknown) else backlog,
                None if any(side(mq) == lane.lane for mq in unknown) else lag, lane.taking_part,
                lane.orphan_policy, lane_state(status.gray_switch, states, lane.orphan_policy), lane.weight))
        return result

    async def weighted_queues(self, gray_clients: list[ClientRecord]) -> list[WeightedQueue]:
        """The queues the clients report holding that their topic's route does not lay out as gray (a topic
        without a route is left out: its layout is unknown)."""
        routes: dict[str, TopicRoute | None] = {}
        weighted = []
        for client in gray_clients:
            for text in client.queues:
                mq = _parse_queue(text)
                if mq is None:
                    continue
                if mq.topic not in routes:
                    routes[mq.topic] = await self._route(mq.topic)
                route = routes[mq.topic]
                if route is not None and route.broker(mq.broker_name) is not None and not route.is_gray(mq):
                    weighted.append(WeightedQueue(client.client_id, mq))
        return sorted(weighted, key=lambda w: (w.queue, w.client_id))

    async def _queues(self, topics: set[str]) -> list[MessageQueue]:
        queues: list[MessageQueue] = []
        for topic in topics:
            route = await self._route(topic)
            if route is not None:
                queues += route.queues()
        return queues

    async def _broker_sets(self, names: set[str]) -> list[ReplicaSetRecord]:
        """The broker sets among ``names``: leader, epoch, in-sync replicas and each replica's lag."""
        try:
            brokers = await self.nameserver.list_brokers()
        except GrayMQError as exc:
            log.debug("broker sets unavailable: %s", exc.message)
            return []
        return [b.replica_set for b in brokers if b.broker_name in names and b.replica_set is not None]

    async def lane_backlog(self, group: str, topic: str, lane: str) -> int:
        """What ``group`` has not consumed of ``lane``'s slot of ``topic`` (``BacklogUnavailable`` when unknown)."""
        return sum(q.backlog for q in (await self._backlogs(group, {topic}, True, False, lane)).queues)

    async def route(self, topic: str) -> TopicRoute | None:
        """The topic's route as the name server gives it now (None when it has none)."""
        self.routes.invalidate(topic)
        return await self._route(topic)

    async def _route(self, topic: str) -> TopicRoute | None:
        try:
            return await self.routes.get(topic)
        except GrayMQError as exc:
            log.debug("no route for %s: %s", topic, exc.message)
            return None


def side_lag(status: GroupStatus, backlogs: list[QueueBacklog],
             unknown: Sequence[MessageQueue] = ()) -> dict[str, int | None]:
    """Per side, the backlog of the queues its consumers hold; an unheld queue counts for the side its layout
    gives it (a gray queue: gray). A retired consumer holds nothing. A side holding one of the ``unknown`` queues
    (its broker did not answer) has an unknown lag (None)."""
    gray_queues = {_queue_key(q) for q in status.queues} | {str(mq) for mq in status.unknown_gray}
    owner_gray = {queue: c.gray for c in status.clients if c.state != ClientState.RETIRED for queue in c.queues}

    def side(key: str) -> str:
        return "gray" if owner_gray.get(key, key in gray_queues) else "normal"

    known = dict.fromkeys(SIDES, 0)
    for q in backlogs:
        known[side(_queue_key(q))] += q.backlog
    blind = {side(str(mq)) for mq in unknown}
    return {name: None if name in blind else figure for name, figure in known.items()}


def _queue_key(q: QueueBacklog) -> str:
    return f"{q.broker_name}:{q.topic}:{q.queue_id}"


def _merged(*reads: list[UnavailableBroker]) -> list[UnavailableBroker]:
    """One entry per broker that did not answer (the first read's), in the order met."""
    merged: dict[str, UnavailableBroker] = {}
    for read in reads:
        for broker in read:
            merged.setdefault(broker.broker_name, broker)
    return list(merged.values())


def _parse_queue(text: str) -> MessageQueue | None:
    """``broker:topic:queue_id`` (how clients report a queue) as a MessageQueue; None when it is not one."""
    broker_name, _, rest = text.partition(":")
    topic, _, queue_id = rest.rpartition(":")
    if not broker_name or not topic or not queue_id.isdigit():
        return None
    return MessageQueue(topic, broker_name, int(queue_id))
