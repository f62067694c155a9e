"""Typed name-server answers built in a test, without a name server."""

from __future__ import annotations

from typing import Any

from graymq.nameserver_api.records import ClientRecord, HeartbeatAnswer

CLIENT_DEFAULTS: dict[str, Any] = {
    "role": "consumer", "labels": {}, "explicit_gray": None, "declared_gray": None, "desired_gray": False,
    "gray": False, "state": "NORMAL", "queues": [], "topics": [], "last_seen": "2026-01-01T00:00:00Z",
}


def client_record(client_id: str, **fields: Any) -> ClientRecord:
    """A registered client as ``/v1/groups/{group}/clients`` lists it: ``fields`` over plain defaults (a normal
    consumer holding nothing)."""
    return ClientRecord.from_json({**CLIENT_DEFAULTS, "client_id": client_id, **fields})


ANSWER_DEFAULTS: dict[str, Any] = {
    "group": "G", "client_id": "c", "role": "consumer", "gray_switch": True, "desired_gray": False,
    "explicit_gray": None, "gray": False, "state": "NORMAL", "orphan_policy": "hold", "gray_weight": 0,
}


def heartbeat_answer_json(**fields: Any) -> dict[str, Any]:
    """A heartbeat's answer as the name server sends it: ``fields`` over plain defaults (a normal client of a group
    whose gray switch is on)."""
    return {**ANSWER_DEFAULTS, **fields}


def heartbeat_answer(**fields: Any) -> HeartbeatAnswer:
    """``heartbeat_answer_json`` as the name-server client gives it."""
    return HeartbeatAnswer.from_json(heartbeat_answer_json(**fields))
