"""Which heartbeats of a batch can be stored in bulk, and what storing one changes.

A batch of client heartbeats (``POST /v1/clients/heartbeats``) is stored in one transaction for the clients that are
settled: registered already, bound to the caller (or nothing to bind) and live, so that storing the report binds
nothing and needs no lock of the client id. Their reports are applied to their rows read in one statement; a report
that changed nothing but the time refreshes ``last_seen`` only. Every other heartbeat (a first one, a claim of an
expired or unbound client, one another principal's client refuses) goes the single heartbeat's way.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from graymq.nameserver.models import Client
from graymq.nameserver.repositories.clients import REPORTED, ClientBinding
from graymq.nameserver.schemas import ClientHeartbeat


def settled_row(rows: Sequence[Client], role: str, binding: ClientBinding, live_after: datetime) -> Client | None:
    """The row of ``role`` among a client id's ``rows`` when a heartbeat through ``binding`` would store into it and
    change no binding, else None (the heartbeat then goes the single way, under the client id's lock).

    With ``binding.enforce`` the row must be the caller's and seen after ``live_after`` (well inside the expiry, so
    it cannot expire while the batch is stored: a first heartbeat of another principal under the same client id
    reads it live and is refused), and every other role's row must allow the caller (else the single way refuses
    it). Without, its principal must stay as it is (an admin's or dev mode's heartbeat claims no unbound row here).
    """
    row = next((r for r in rows if r.role == role), None)
    if row is None:
        return None
    if not binding.enforce:
        claimed = (binding.principal or row.principal) if binding.claimable(row) else row.principal
        return row if claimed == row.principal else None
    if row.principal != binding.principal or row.last_seen <= live_after:
        return None
    return row if all(binding.allows(other) for other in rows) else None


def apply_report(row: Client, report: ClientHeartbeat, now: datetime) -> bool:
    """Set ``row``'s reported columns to ``report``'s and ``last_seen`` to ``now``; whether a reported column
    changed (else only ``last_seen`` need be written)."""
    values = report.model_dump(include=set(REPORTED))
    changed = any(getattr(row, column) != value for column, value in values.items())
    for column, value in values.items():
        setattr(row, column, value)
    row.last_seen = now
    return changed
