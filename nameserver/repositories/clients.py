"""Clients of groups, as their heartbeats describe them."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import bindparam, func, select, update
from sqlalchemy.orm import Session

from graymq.nameserver.db import upsert_insert
from graymq.nameserver.models import Client, Group
from graymq.nameserver.schemas import ClientHeartbeat

# ``last_seen`` of a client that unregistered: older than any expiry, so no view counts it live, while its
# row (and the explicit flag operators gave the client id) stays for a restart under the same id.
UNREGISTERED = datetime(1970, 1, 1, tzinfo=UTC)

_REPORTED = ("labels", "declared_gray", "gray", "state", "queues", "topics", "last_seen")


@functools.cache
def _upsert_statement(dialect: str) -> Any:
    """The heartbeat's INSERT ... ON CONFLICT DO UPDATE, built once per backend (building it per heartbeat
    cost more than running it); parameters: group_id, client_id, role and the reported columns."""
    sibling_flag = (
        select(Client.explicit_gray)
        .where(Client.group_id == bindparam("group_id"), Client.client_id == bindparam("client_id"))
        .order_by(Client.role)
        .limit(1)
        .scalar_subquery()
    )
    stmt = upsert_insert(dialect, Client).values(
        group_id=bindparam("group_id"),
        client_id=bindparam("client_id"),
        role=bindparam("role"),
        explicit_gray=sibling_flag,
        first_seen=bindparam("last_seen"),
        **{column: bindparam(column) for column in _REPORTED},
    )
    return stmt.on_conflict_do_update(
        index_elements=[Client.group_id, Client.client_id, Client.role],
        set_={column: getattr(stmt.excluded, column) for column in _REPORTED},
    ).returning(Client)


class ClientRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def upsert(self, group_id: int, report: ClientHeartbeat, now: datetime) -> Client:
        """Store what the client reports; ``explicit_gray`` (set by operators) is left untouched.

        A role seen for the first time takes the explicit flag the client id already has, so a
        process that starts producing after operators flagged it is flagged alike.
        """
        params = {"group_id": group_id, "client_id": report.client_id, "role": report.role, "last_seen": now,
                  **{column: getattr(report, column) for column in _REPORTED if column != "last_seen"}}
        stmt = _upsert_statement(self.session.get_bind().dialect.name)
        return self.session.scalars(stmt, params, execution_options={"populate_existing": True}).one()

    def of_client(self, group_id: int, client_id: str) -> Sequence[Client]:
        """Every role row of one client id in the group (live or not), by role."""
        stmt = (
            select(Client)
            .where(Client.group_id == group_id, Client.client_id == client_id)
            .order_by(Client.role)
        )
        return self.session.scalars(stmt).all()

    def unregister(self, group_id: int, client_id: str, role: str | None) -> Sequence[Client]:
        """Mark the client id's rows (one role, or all) unregistered; returns the rows that were registered."""
        stmt = (
            update(Client)
            .where(Client.group_id == group_id, Client.client_id == client_id, Client.last_seen > UNREGISTERED)
            .values(last_seen=UNREGISTERED)
            .returning(Client)
        )
        if role is not None:
            stmt = stmt.where(Client.role == role)
        rows = self.session.scalars(stmt, execution_options={"populate_existing": True}).all()
        return sorted(rows, key=lambda row: row.role)

    def live(self, group_id: int, seen_after: datetime, role: str | None = None) -> Sequence[Client]:
        stmt = select(Client).where(Client.group_id == group_id, Client.last_seen > seen_after)
        if role is not None:
            stmt = stmt.where(Client.role == role)
        return self.session.scalars(stmt.order_by(Client.client_id, Client.role)).all()

    def live_counts(self, seen_after: datetime) -> list[tuple[str, str, bool, int]]:
        """(group, role, reported gray, count) of live clients across every group."""
        stmt = (
            select(Group.name, Client.role, Client.gray, func.count())
            .join(Group, Group.id == Client.group_id)
            .where(Client.last_seen > seen_after)
            .group_by(Group.name, Client.role, Client.gray)
        )
        return [
            (name, role, bool(gray), int(count)) for name, role, gray, count in self.session.execute(stmt)
        ]
