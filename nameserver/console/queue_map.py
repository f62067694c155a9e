"""A group's queue map: every queue of every topic its consumers subscribe, on every broker, with its owner and
offsets.

The owners are what the clients report holding (``broker:topic:queue_id``, as ``graymq gray status`` lists them);
the offsets are what the brokers answer for the group. A queue two clients report at once (a hand-over in
flight) names both. Each queue is base or in a lane slot (docs/lanes.md): the lane holding the slot, else free
(``gray`` on a topic with room for one lane only: today's gray queues, shown as before lanes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from graymq.core.queue_layout import GRAY_LANE, slot_of_queue
from graymq.core.route import FREE_SLOT
from graymq.nameserver.schemas import ClientView, TopicRoute


@dataclass(frozen=True, slots=True)
class QueueOffsets:
    """A queue's offsets as its broker reports them for the group (``committed`` -1: never committed)."""

    committed: int
    min_offset: int
    max_offset: int

    @property
    def lag(self) -> int:
        """Messages the group has not consumed yet (from the committed offset, or the oldest kept message)."""
        start = max(self.committed, self.min_offset) if self.committed >= 0 else self.min_offset
        return max(0, self.max_offset - start)


@dataclass(frozen=True, slots=True)
class QueueCell:
    broker: str
    topic: str
    queue_id: int
    gray: bool  # in a lane slot (held or free): not a base queue
    owners: tuple[str, ...]
    offsets: QueueOffsets | None  # None: the broker did not answer
    slot: int | None = None  # the lane slot it is in; None: base
    lane: str | None = None  # the lane shown holding it (its slot's holder); FREE_SLOT: free

    @property
    def key(self) -> str:
        """``BROKER:TOPIC:QUEUE_ID``, the form clients report and ``gray status`` prints."""
        return f"{self.broker}:{self.topic}:{self.queue_id}"


@dataclass(frozen=True, slots=True)
class BrokerRow:
    broker: str
    cells: tuple[QueueCell, ...]
    error: str = ""  # why the offsets are missing


@dataclass(frozen=True, slots=True)
class TopicMap:
    topic: str
    rows: tuple[BrokerRow, ...]
    error: str = ""  # why the topic has no route


@dataclass
class QueueMap:
    topics: list[TopicMap] = field(default_factory=list)

    def cells(self) -> list[QueueCell]:
        return [cell for t in self.topics for row in t.rows for cell in row.cells]

    def gray_cells(self) -> list[QueueCell]:
        return self.lane_cells(GRAY_LANE)

    def lane_cells(self, lane: str | None) -> list[QueueCell]:
        """The queues of ``lane`` (None: the base queues)."""
        return [cell for cell in self.cells() if cell.lane == lane]

    @property
    def gray_backlog(self) -> int | None:
        """The unconsumed messages of the gray queues; None when a broker holding one did not answer."""
        return self.backlog(GRAY_LANE)

    def backlog(self, lane: str | None) -> int | None:
        """The unconsumed messages of ``lane``'s queues (None: base); None when a broker holding one did not
        answer."""
        cells = self.lane_cells(lane)
        if any(cell.offsets is None for cell in cells):
            return None
        return sum(cell.offsets.lag for cell in cells if cell.offsets is not None)

    def lanes(self) -> list[str]:
        """The lanes holding queues of the map, ``gray`` first."""
        held = {cell.lane for cell in self.cells() if cell.lane}
        return sorted(held, key=lambda lane: (lane != GRAY_LANE, lane))

    def unanswered(self) -> list[str]:
        """The brokers that did not answer for some topic (their cells have no offsets), by name."""
        return sorted({row.broker for t in self.topics for row in t.rows if row.error})


def owners_by_queue(clients: Iterable[ClientView]) -> dict[str, tuple[str, ...]]:
    """``BROKER:TOPIC:QUEUE_ID`` → the ids of the clients reporting it, sorted."""
    owners: dict[str, list[str]] = {}
    for client in clients:
        for queue in client.queues:
            owners.setdefault(queue, []).append(client.client_id)
    return {queue: tuple(sorted(set(ids))) for queue, ids in owners.items()}


def build_queue_map(
    routes: Mapping[str, TopicRoute | str],
    owners: Mapping[str, tuple[str, ...]],
    offsets: Mapping[tuple[str, str], dict[int, QueueOffsets] | str],
) -> QueueMap:
    """The map of ``routes`` (topic → its route, or why there is none); ``offsets`` maps (broker, topic) to the
    queues' offsets, or to why the broker did not answer.

    >>> from graymq.nameserver.schemas import BrokerRoute
    >>> route = TopicRoute(topic="T", queue_nums=3, gray_queue_nums=1, brokers=[
    ...     BrokerRoute(broker_name="b", address="h:1", queue_nums=3, gray_queue_nums=1, perm=6)])
    >>> qmap = build_queue_map({"T": route}, {"b:T:0": ("v2",)}, {("b", "T"): {0: QueueOffsets(5, 0, 9)}})
    >>> [(c.key, c.gray, c.owners, c.offsets and c.offsets.lag) for c in qmap.cells()]
    [('b:T:0', True, ('v2',), 4), ('b:T:1', False, (), None), ('b:T:2', False, (), None)]
    >>> laned = TopicRoute(topic="T", queue_nums=5, gray_queue_nums=1, lanes={"v3": 2}, brokers=[
    ...     BrokerRoute(broker_name="b", address="h:1", queue_nums=5, gray_queue_nums=1, perm=6, lane_slots=3)])
    >>> [(c.queue_id, c.slot, c.lane) for c in build_queue_map({"T": laned}, {}, {}).cells() if c.gray]
    [(0, 0, ''), (3, 1, ''), (4, 2, 'v3')]
    """
    qmap = QueueMap()
    for topic in sorted(routes, key=lambda t: (t.startswith("%"), t)):  # retry and dead-letter topics last
        route = routes[topic]
        if isinstance(route, str):
            qmap.topics.append(TopicMap(topic, (), error=route))
            continue
        holders = {slot: lane for lane, slot in route.lanes.items()}
        rows = []
        for broker in sorted(route.brokers, key=lambda b: b.broker_name):
            answer = offsets.get((broker.broker_name, topic), {})
            known = answer if isinstance(answer, dict) else {}
            cells = []
            for qid in range(broker.queue_nums):
                slot = slot_of_queue(qid, broker.queue_nums, broker.gray_queue_nums, broker.lane_slots)
                cells.append(QueueCell(broker.broker_name, topic, qid, slot is not None,
                                       owners.get(f"{broker.broker_name}:{topic}:{qid}", ()),
                                       None if isinstance(answer, str) else known.get(qid), slot,
                                       _shown_lane(slot, holders, broker.lane_slots)))
            rows.append(BrokerRow(broker.broker_name, tuple(cells), answer if isinstance(answer, str) else ""))
        qmap.topics.append(TopicMap(topic, tuple(rows)))
    return qmap


def _shown_lane(slot: int | None, holders: Mapping[int, str], lane_slots: int) -> str | None:
    """The lane a queue of ``slot`` is shown in: its holder; gray in the free slot of a topic with room for one
    lane only (today's gray queues, shown as before lanes)."""
    if slot is None:
        return None
    return holders.get(slot) or (GRAY_LANE if lane_slots == 1 else FREE_SLOT)
