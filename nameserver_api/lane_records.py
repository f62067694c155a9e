"""What the name server's REST API answers about lanes (docs/lanes.md), as frozen values.

``NameServerClient`` converts its JSON answers here (``from_json``); ``to_json`` gives the name server's JSON back,
key for key.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from graymq.protocol.membership import OrphanPolicy

GRAY_LANE = "gray"


@dataclass(frozen=True)
class LaneRule:
    """A label rule naming a lane: of one group (``/v1/groups/{group}/rules``) or, with ``group`` ``None``, of every
    group (``/v1/rules``, after each group's own rules). Clients whose labels match ``selector`` are in ``lane``
    (``None``: base, for a rule with ``gray`` false; a group's true rule that names no lane is ``gray``).

    >>> rule = LaneRule.from_json({"id": 3, "selector": {"host": "orders-v3-*"}, "gray": True, "lane": "v3",
    ...                            "position": 0, "created_at": "2026-01-01T00:00:00Z"})
    >>> rule.group, rule.lane, rule.to_json()["created_at"]
    (None, 'v3', '2026-01-01T00:00:00Z')
    >>> LaneRule.from_json({"id": 4, "group": "g", "selector": {"v": "2"}, "gray": True, "position": 0,
    ...                     "created_at": "2026-01-01T00:00:00Z"}).lane
    'gray'
    """

    id: int
    group: str | None
    selector: dict[str, str]
    gray: bool
    lane: str | None
    position: int
    created_at: datetime

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LaneRule:
        gray = bool(data["gray"])
        return cls(id=int(data["id"]), group=data.get("group"), selector=dict(data["selector"]), gray=gray,
                   lane=data.get("lane") or (GRAY_LANE if gray else None), position=int(data["position"]),
                   created_at=datetime.fromisoformat(data["created_at"]))

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "selector": self.selector, "gray": self.gray, "lane": self.lane,
                                "position": self.position,
                                "created_at": self.created_at.isoformat().replace("+00:00", "Z")}
        return data if self.group is None else {"group": self.group, **data}


@dataclass(frozen=True)
class GroupLane:
    """One lane as a group sees it (``/v1/groups/{group}/lanes``): its live clients in the lane (``ID (ROLE)``),
    whether the group takes part, what it does with the lane's queues no consumer of the lane serves (and the
    override set for it, if any), the slot the lane holds per topic, and its weight (percent of each topic's base
    queues its consumers take; absent in an answer from before weights per lane: 0).

    >>> lane = GroupLane.from_json({"lane": "v3", "clients": ["c1 (consumer)"], "taking_part": True,
    ...     "orphan_policy": "hold", "orphan_policy_override": None, "slots": {"T": 1}, "weight": 20})
    >>> lane.slots, lane.weight, lane.to_json()["clients"]
    ({'T': 1}, 20, ['c1 (consumer)'])
    """

    lane: str
    clients: tuple[str, ...]
    taking_part: bool
    orphan_policy: OrphanPolicy
    orphan_policy_override: OrphanPolicy | None
    slots: dict[str, int]
    weight: int = 0

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GroupLane:
        return cls(lane=data["lane"], clients=tuple(data["clients"]), taking_part=bool(data["taking_part"]),
                   orphan_policy=data["orphan_policy"], orphan_policy_override=data.get("orphan_policy_override"),
                   slots={topic: int(slot) for topic, slot in data["slots"].items()},
                   weight=int(data.get("weight") or 0))

    def to_json(self) -> dict[str, Any]:
        return {"lane": self.lane, "clients": list(self.clients), "taking_part": self.taking_part,
                "orphan_policy": self.orphan_policy, "orphan_policy_override": self.orphan_policy_override,
                "slots": dict(self.slots), "weight": self.weight}


@dataclass(frozen=True)
class TopicLanes:
    """A topic's lane slots and the lane holding each taken one (``/v1/topics/{topic}/lanes/{lane}``).

    >>> TopicLanes.from_json({"topic": "T", "lane_slots": 2, "lanes": {"gray": 0}}).free_slots
    1
    """

    topic: str
    lane_slots: int
    lanes: dict[str, int]

    @property
    def free_slots(self) -> int:
        return self.lane_slots - len(self.lanes)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TopicLanes:
        return cls(topic=data["topic"], lane_slots=int(data["lane_slots"]),
                   lanes={lane: int(slot) for lane, slot in data["lanes"].items()})

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "lane_slots": self.lane_slots, "lanes": dict(self.lanes)}
