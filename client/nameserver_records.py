"""What the name server's REST API answers about operations and rules, as frozen values.

``NameServerClient`` converts its JSON answers here (``from_json``); ``to_json`` gives the
name server's JSON back unchanged, key for key, for what prints it (``graymq gray history --json``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

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
