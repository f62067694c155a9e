"""What the name server's REST API answers about groups, rules and operations, as frozen values.

``NameServerClient`` converts its JSON answers here (``from_json``); ``to_json`` gives the
name server's JSON back unchanged, key for key, for what prints it (``graymq gray history --json``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from graymq.protocol.membership import OrphanPolicy
from graymq.protocol.operations import CutoverKind, CutoverMode, CutoverState


def _time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def _text(moment: datetime | None) -> str | None:
    """A UTC timestamp as the name server writes it (``...Z``, microseconds only when there are some)."""
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class CutoverRecord:
    """A promote, rollback or rollout as the name server recorded it (``/v1/cutovers/{id}``).

    >>> record = CutoverRecord.from_json({"id": 7, "group": "g", "kind": "promote", "mode": "drain",
    ...     "producer_groups": ["g"], "state": "RUNNING", "step": "drain", "result": None, "started_by": "ops",
    ...     "started_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:01.5Z", "finished_at": None})
    >>> record.kind, record.state.finished, record.updated_at.microsecond
    (<CutoverKind.PROMOTE: 'promote'>, False, 500000)
    >>> record.to_json()["updated_at"]
    '2026-01-01T00:00:01.500000Z'
    """

    id: int
    group: str
    kind: CutoverKind
    mode: CutoverMode
    producer_groups: tuple[str, ...]
    state: CutoverState
    step: str | None
    result: dict[str, Any] | None
    started_by: str
    started_at: datetime
    updated_at: datetime
    finished_at: datetime | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CutoverRecord:
        return cls(id=int(data["id"]), group=data["group"], kind=CutoverKind(data["kind"]),
                   mode=CutoverMode(data["mode"]), producer_groups=tuple(data["producer_groups"]),
                   state=CutoverState(data["state"]), step=data["step"], result=data["result"],
                   started_by=data["started_by"], started_at=datetime.fromisoformat(data["started_at"]),
                   updated_at=datetime.fromisoformat(data["updated_at"]), finished_at=_time(data["finished_at"]))

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "group": self.group, "kind": self.kind.value, "mode": self.mode.value,
                "producer_groups": list(self.producer_groups), "state": self.state.value, "step": self.step,
                "result": self.result, "started_by": self.started_by, "started_at": _text(self.started_at),
                "updated_at": _text(self.updated_at), "finished_at": _text(self.finished_at)}


@dataclass(frozen=True)
class GrayRule:
    """A group's label rule (``/v1/groups/{group}/rules``): clients whose labels match ``selector`` get ``gray``."""

    id: int
    group: str
    selector: dict[str, str]
    gray: bool
    position: int
    created_at: datetime

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GrayRule:
        return cls(id=int(data["id"]), group=data["group"], selector=dict(data["selector"]), gray=bool(data["gray"]),
                   position=int(data["position"]), created_at=datetime.fromisoformat(data["created_at"]))


@dataclass(frozen=True)
class GroupSettings:
    """A consumer group's gray settings (``/v1/groups/{group}`` and what its switch, orphan-policy, weight and
    retired calls answer)."""

    group: str
    gray_switch: bool
    orphan_policy: OrphanPolicy
    gray_weight: int
    gray_retired: bool
    created_at: datetime
    updated_at: datetime
    fifo: bool = False  # stock pop consumers: one message in flight per queue, in order
    max_attempts: int = 16  # stock pop consumers: deliveries before the dead-letter queue

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GroupSettings:
        return cls(group=data["group"], gray_switch=bool(data["gray_switch"]), orphan_policy=data["orphan_policy"],
                   gray_weight=int(data["gray_weight"]), gray_retired=bool(data.get("gray_retired", False)),
                   created_at=datetime.fromisoformat(data["created_at"]),
                   updated_at=datetime.fromisoformat(data["updated_at"]), fifo=bool(data.get("fifo", False)),
                   max_attempts=int(data.get("max_attempts", 16)))

    def to_json(self) -> dict[str, Any]:
        return {"group": self.group, "gray_switch": self.gray_switch, "orphan_policy": self.orphan_policy,
                "gray_weight": self.gray_weight, "gray_retired": self.gray_retired, "fifo": self.fifo,
                "max_attempts": self.max_attempts,
                "created_at": _text(self.created_at), "updated_at": _text(self.updated_at)}


@dataclass(frozen=True)
class GroupSummary:
    """A group as ``GET /v1/groups`` lists it: its settings and how many clients (every role) are registered live."""

    settings: GroupSettings
    live_clients: int

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GroupSummary:
        return cls(settings=GroupSettings.from_json(data), live_clients=int(data["live_clients"]))

    def to_json(self) -> dict[str, Any]:
        return {**self.settings.to_json(), "live_clients": self.live_clients}


@dataclass(frozen=True)
class GroupDetail:
    """One group as ``GET /v1/groups/{group}`` answers: its settings, its rules in order, its running operation."""

    settings: GroupSettings
    rules: tuple[GrayRule, ...]
    running_cutover: CutoverRecord | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GroupDetail:
        running = data.get("running_cutover")
        return cls(settings=GroupSettings.from_json(data), rules=tuple(GrayRule.from_json(r) for r in data["rules"]),
                   running_cutover=None if running is None else CutoverRecord.from_json(running))
