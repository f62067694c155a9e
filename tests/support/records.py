"""Typed name-server answers built in a test, without a name server."""

from __future__ import annotations

from typing import Any

from graymq.nameserver_api.records import ClientRecord

CLIENT_DEFAULTS: dict[str, Any] = {
    "role": "consumer", "labels": {}, "explicit_gray": None, "declared_gray": None, "desired_gray": False,
    "gray": False, "state": "NORMAL", "queues": [], "topics": [], "last_seen": "2026-01-01T00:00:00Z",
}


def client_record(client_id: str, **fields: Any) -> ClientRecord:
    """A registered client as ``/v1/groups/{group}/clients`` lists it: ``fields`` over plain defaults (a normal
    consumer holding nothing)."""
    return ClientRecord.from_json({**CLIENT_DEFAULTS, "client_id": client_id, **fields})
