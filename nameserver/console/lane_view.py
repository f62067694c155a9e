"""A group's lanes as its console page shows them side by side (base, then each lane: its clients, queues, backlog,
how the group treats it, its running operation), and which lane holds which slot of each topic (docs/lanes.md).

A group that meets no lane but ``gray`` gets neither: its page is the gray/normal view it had before lanes.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from graymq.core.queue_layout import GRAY_LANE, slot_queue_ids
from graymq.nameserver.console.drain import DrainProgress, DrainWatch
from graymq.nameserver.console.queue_map import QueueMap
from graymq.nameserver.schemas import ClientView, CutoverView, GroupLaneView, TopicRoute

CONSUMING_ROLES = ("consumer", "spark")
LANE_COLOURS = 6  # colours of lanes other than gray (console.css: .lane-c1 … .lane-c6)

LANE_CLIENTS_SHOWN = 20  # a lane column names this many of its clients (the client table pages them all)


def lane_colour(lane: str | None) -> str:
    """The colour class of ``lane`` on the queue map, the lane columns and the charts: ``base``, ``lane-c0`` for
    gray (today's gray colour), another lane one of six by a stable hash of its name.

    >>> lane_colour(None), lane_colour("gray"), lane_colour("v3") == lane_colour("v3")
    ('base', 'lane-c0', True)
    """
    if lane is None:
        return "base"
    if lane == GRAY_LANE:
        return "lane-c0"
    return f"lane-c{1 + zlib.crc32(lane.encode()) % LANE_COLOURS}"


@dataclass
class LaneColumn:
    """One side of the group: base (``lane`` None) or a lane."""

    lane: str | None
    clients: list[ClientView]  # in it now, or headed there (``desired_lane``)
    queues: int  # its queues on the group's topics
    held: int  # of them, those a client reports holding
    backlog: int | None  # None: a broker did not answer
    view: GroupLaneView | None = None  # how the group treats the lane (None: base, or a lane it has no record of)
    running: CutoverView | None = None
    drain: DrainProgress | None = None

    @property
    def name(self) -> str:
        return self.lane or "base"

    @property
    def colour(self) -> str:
        return lane_colour(self.lane)


@dataclass
class SlotUse:
    """One slot of a topic: the lane holding it (``""``: free) and its queue ids on each broker."""

    slot: int
    lane: str
    queues: dict[str, tuple[int, ...]] = field(default_factory=dict)  # broker -> queue ids


@dataclass
class TopicSlots:
    topic: str
    lane_slots: int
    slots: list[SlotUse]

    @property
    def free(self) -> int:
        return sum(not s.lane for s in self.slots)


@dataclass(frozen=True, slots=True)
class LaneCount:
    """One lane of a group on the groups page: the clients in it now and its queues' backlog."""

    lane: str
    clients: int
    backlog: int | None  # None: a broker did not answer

    @property
    def colour(self) -> str:
        return lane_colour(self.lane)


def lane_in(client: ClientView) -> str | None:
    """The lane a client is in now (None: base); a gray client naming no lane (from before lanes) is in ``gray``."""
    return (client.lane or GRAY_LANE) if client.gray else None


def lane_counts(clients: Sequence[ClientView], qmap: QueueMap) -> list[LaneCount]:
    """Each lane a client of the group is in or that holds queues of its topics, ``gray`` first, with its count of
    clients and its backlog."""
    lanes = {lane for c in clients if (lane := lane_in(c)) is not None} | set(qmap.lanes())
    return [LaneCount(lane, sum(lane_in(c) == lane for c in clients), qmap.backlog(lane))
            for lane in sorted(lanes, key=lambda name: (name != GRAY_LANE, name))]


def lane_of_client(client: ClientView) -> str | None:
    """The lane a client is shown in: the one it reports, else the one it is headed to."""
    return client.lane or client.desired_lane


def lane_columns(clients: Sequence[ClientView], qmap: QueueMap, views: Iterable[GroupLaneView],
                 running: Iterable[CutoverView], drains: DrainWatch) -> list[LaneColumn]:
    """Base and each lane the group meets on its topics, ``gray`` first; empty when it meets no lane but gray."""
    topics = {t.topic for t in qmap.topics}
    by_lane = {v.lane: v for v in views
               if v.clients or v.taking_part or v.orphan_policy_override or set(v.slots) & topics}
    ops = {op.lane: op for op in running}
    lanes = set(by_lane) | set(qmap.lanes()) | set(ops) | {lane_of_client(c) for c in clients} - {None}
    if not lanes - {GRAY_LANE}:
        return []
    columns = []
    for lane in [None, *sorted(lanes, key=lambda name: (name != GRAY_LANE, name))]:
        cells = qmap.lane_cells(lane)
        members = [c for c in clients if lane_of_client(c) == lane]
        column = LaneColumn(lane, members, len(cells), sum(bool(c.owners) for c in cells), qmap.backlog(lane),
                            by_lane.get(lane or ""), ops.get(lane or ""))
        if column.running is not None:
            consuming = sum(c.lane == lane for c in members if c.role in CONSUMING_ROLES)
            column.drain = drains.progress(column.running.id, column.backlog, consuming)
        columns.append(column)
    return columns


def slot_use(routes: Mapping[str, TopicRoute | str], lanes_shown: bool) -> list[TopicSlots]:
    """Each topic's slots with their holders and queues, for topics with room for more than one lane or a lane
    other than gray (all of them once ``lanes_shown``); empty when none.

    >>> from graymq.nameserver.schemas import BrokerRoute
    >>> route = TopicRoute(topic="T", queue_nums=8, gray_queue_nums=2, lanes={"v3": 1}, brokers=[
    ...     BrokerRoute(broker_name="b", address="h:1", queue_nums=8, gray_queue_nums=2, perm=6, lane_slots=2)])
    >>> [(s.slot, s.lane, s.queues) for s in slot_use({"T": route}, False)[0].slots]
    [(0, '', {'b': (0, 5)}), (1, 'v3', {'b': (6, 7)})]
    """
    out = []
    for topic, route in sorted(routes.items()):
        if isinstance(route, str) or not route.gray_queue_nums:
            continue
        lane_slots = max((b.lane_slots for b in route.brokers), default=1)
        if not (lanes_shown or lane_slots > 1 or set(route.lanes) - {GRAY_LANE}):
            continue
        holders = {slot: lane for lane, slot in route.lanes.items()}
        slots = [SlotUse(slot, holders.get(slot, "")) for slot in range(lane_slots)]
        for broker in route.brokers:
            for use in slots[:broker.lane_slots]:
                use.queues[broker.broker_name] = slot_queue_ids(broker.queue_nums, broker.gray_queue_nums,
                                                                broker.lane_slots, use.slot)
        out.append(TopicSlots(topic, lane_slots, slots))
    return out
