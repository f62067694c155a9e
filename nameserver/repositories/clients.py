"""Clients of groups, as their heartbeats describe them."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import ColumnElement, Text, Update, bindparam, case, cast, func, or_, select, tuple_, update
from sqlalchemy.orm import Session

from graymq.nameserver.db import upsert_insert
from graymq.nameserver.models import Client, Group
from graymq.nameserver.schemas import ClientHeartbeat

# ``last_seen`` of a client that unregistered: older than any expiry, so no view counts it live, while its
# row (and the explicit flag operators gave the client id) stays for a restart under the same id.
UNREGISTERED = datetime(1970, 1, 1, tzinfo=UTC)

# The columns a heartbeat reports; a heartbeat stores them and ``last_seen``.
REPORTED = ("labels", "declared_gray", "gray", "state", "queues", "topics", "health", "gray_marks", "declared_lane",
            "lane", "frozen_lanes")
_STORED = (*REPORTED, "last_seen")


@dataclass(frozen=True)
class ClientBinding:
    """Who a call acts for, and whether a client registration it touches is theirs to use.

    A client registration (group, client id, role) belongs to the principal whose heartbeat created it.
    It is claimable — the next heartbeat binds it to its caller — while it has no principal (rows from
    before bindings, or written in dev mode) or once it has expired (no heartbeat for
    ``client_expiry_seconds``, or unregistered): a client id that is gone may be reused by anyone.
    A live registration of another principal may be neither heartbeated, watched nor unregistered
    unless ``enforce`` is off (admins, who may act on any client without taking it over, and dev mode,
    where ``principal`` is ``None`` and nothing is bound).
    """

    principal: str | None
    enforce: bool
    expired_before: datetime

    def claimable(self, client: Client) -> bool:
        return client.principal is None or client.last_seen <= self.expired_before

    def allows(self, client: Client) -> bool:
        return not self.enforce or client.principal == self.principal or self.claimable(client)


@functools.cache
def _upsert_statement(dialect: str, enforce: bool) -> Any:
    """The heartbeat's INSERT ... ON CONFLICT DO UPDATE, built once per backend and ``enforce`` (building it
    per heartbeat cost more than running it); parameters: group_id, client_id, role, the reported columns,
    principal and expired_before. With ``enforce`` a live row of another principal is left as it is and
    nothing is returned; a claimable row takes the caller as its principal (``ClientBinding``)."""
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
        principal=bindparam("principal"),
        **{column: bindparam(column) for column in _STORED},
    )
    claimable = or_(Client.principal.is_(None), Client.last_seen <= bindparam("expired_before"))
    claimed = case((claimable, func.coalesce(stmt.excluded.principal, Client.principal)), else_=Client.principal)
    return stmt.on_conflict_do_update(
        index_elements=[Client.group_id, Client.client_id, Client.role],
        set_={"principal": claimed, **{column: getattr(stmt.excluded, column) for column in _STORED}},
        where=or_(claimable, Client.principal == stmt.excluded.principal) if enforce else None,
    ).returning(Client)


def _refresh(which: ColumnElement[bool], now: datetime, live_after: datetime, binding: ClientBinding) -> Update:
    """The update setting ``last_seen`` to ``now`` of the rows ``which`` selects that were seen after ``live_after``
    and that ``binding`` may beat without binding anything (``refresh_alive``)."""
    stmt = update(Client).where(which, Client.last_seen > live_after).values(last_seen=now)
    if binding.enforce:
        return stmt.where(Client.principal == binding.principal)
    if binding.principal is not None:
        return stmt.where(Client.principal.is_not(None))  # an admin's full heartbeat would claim an unbound row
    return stmt


class ClientRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def upsert(self, group_id: int, report: ClientHeartbeat, now: datetime, binding: ClientBinding) -> Client | None:
        """Store what the client reports; ``explicit_gray`` (set by operators) is left untouched.

        A role seen for the first time takes the explicit flag the client id already has, so a
        process that starts producing after operators flagged it is flagged alike. ``None`` (nothing
        stored) when ``binding`` does not allow the caller the row: checked and written in one statement.
        """
        params = {"group_id": group_id, "client_id": report.client_id, "role": report.role, "last_seen": now,
                  "principal": binding.principal, "expired_before": binding.expired_before,
                  **report.model_dump(include=set(_STORED))}
        stmt = _upsert_statement(self.session.get_bind().dialect.name, binding.enforce)
        return self.session.scalars(stmt, params, execution_options={"populate_existing": True}).one_or_none()

    def lock_client_id(self, group_id: int, client_id: str) -> None:
        """Hold, until the transaction ends, the right to bind the client id in the group (any role), so that two
        first heartbeats of one client id as different roles cannot both see it unbound: one waits for the other's
        commit and its next read sees the binding. PostgreSQL: an advisory lock keyed on the group and a hash of
        the client id (a collision only makes two client ids wait for each other). SQLite: nothing to do, a
        writing transaction holds the database's write lock from its BEGIN (``db.create_db_engine``)."""
        if self.session.get_bind().dialect.name == "postgresql":
            self.session.execute(select(func.pg_advisory_xact_lock(group_id, func.hashtext(client_id))))

    def of_client(self, group_id: int, client_id: str, *, lock: bool = False) -> Sequence[Client]:
        """Every role row of one client id in the group (live or not), by role; ``lock``: FOR UPDATE."""
        stmt = (
            select(Client)
            .where(Client.group_id == group_id, Client.client_id == client_id)
            .order_by(Client.role)
        )
        if lock:
            stmt = stmt.with_for_update()
        return self.session.scalars(stmt).all()

    def of_clients(self, keys: Iterable[tuple[int, str]]) -> dict[tuple[int, str], list[Client]]:
        """``of_client`` of each (group id, client id) of ``keys`` in one statement, detached from the session: a
        batch of heartbeats applies reports to them and writes them back in bulk (``touch``, ``store``)."""
        wanted = sorted(set(keys))
        by_client: dict[tuple[int, str], list[Client]] = {}
        if not wanted:
            return by_client
        stmt = (select(Client).where(tuple_(Client.group_id, Client.client_id).in_(wanted))
                .order_by(Client.group_id, Client.client_id, Client.role))
        for row in self.session.scalars(stmt, execution_options={"populate_existing": True}).all():
            self.session.expunge(row)
            by_client.setdefault((row.group_id, row.client_id), []).append(row)
        return by_client

    def touch(self, ids: Sequence[int], now: datetime) -> None:
        """Refresh ``last_seen`` of the rows ``ids`` (clients whose reports did not change): one statement."""
        if ids:
            self.session.execute(update(Client).where(Client.id.in_(sorted(ids))).values(last_seen=now))

    def store(self, rows: Sequence[Client]) -> None:
        """Write the reported columns of ``rows`` (detached, as ``of_clients`` gives them): one batch of updates by
        primary key, in key order (two batches sharing rows lock them in one order)."""
        if rows:
            values = [{"id": row.id, **{column: getattr(row, column) for column in _STORED}}
                      for row in sorted(rows, key=lambda row: row.id)]
            self.session.execute(update(Client), values)

    def refresh_alive(self, keys: Iterable[tuple[int, str, str]], now: datetime, live_after: datetime,
                      binding: ClientBinding) -> dict[tuple[int, str, str], int]:
        """Set ``last_seen`` to ``now`` of the rows of ``keys`` (group id, client id, role) seen after ``live_after``
        that ``binding`` may beat without binding anything (with ``enforce``: the caller's; an admin's: bound to
        someone; dev mode: any) in one statement; returns the refreshed rows' ids by key."""
        wanted = sorted(set(keys))
        if not wanted:
            return {}
        stmt = _refresh(tuple_(Client.group_id, Client.client_id, Client.role).in_(wanted), now, live_after, binding)
        rows = self.session.execute(stmt.returning(Client.id, Client.group_id, Client.client_id, Client.role),
                                    execution_options={"synchronize_session": False})
        return {(group_id, client_id, role): row_id for row_id, group_id, client_id, role in rows}

    def refresh_alive_ids(self, ids: Iterable[int], now: datetime, live_after: datetime, binding: ClientBinding
                          ) -> set[int]:
        """``refresh_alive`` by row ids: the ids of the rows refreshed."""
        wanted = sorted(set(ids))
        if not wanted:
            return set()
        stmt = _refresh(Client.id.in_(wanted), now, live_after, binding).returning(Client.id)
        return set(self.session.scalars(stmt, execution_options={"synchronize_session": False}))

    def store_health(self, health: dict[int, dict[str, Any] | None]) -> None:
        """Write ``health`` (row id -> report) of alive clients: one batch of updates by primary key, in key order."""
        if health:
            values = [{"id": row_id, "health": health[row_id]} for row_id in sorted(health)]
            self.session.execute(update(Client), values)

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

    def live(self, group_id: int, seen_after: datetime, role: str | None = None, *, limit: int | None = None,
             offset: int = 0) -> Sequence[Client]:
        """The group's live clients (of ``role``) by client id and role; ``limit``/``offset``: one page of them,
        read along the (group, client id, role) unique index, so a page costs its rows, not the group's."""
        stmt = select(Client).where(Client.group_id == group_id, Client.last_seen > seen_after)
        if role is not None:
            stmt = stmt.where(Client.role == role)
        stmt = stmt.order_by(Client.client_id, Client.role).offset(offset or None)
        return self.session.scalars(stmt if limit is None else stmt.limit(limit)).all()

    def live_tally(self, group_id: int, seen_after: datetime, stale_before: datetime, role: str | None = None
                   ) -> list[tuple[str, bool, str | None, int, int]]:
        """(role, reported gray, reported lane as stored, live clients, stale ones among them) of the group's live
        clients (of ``role``): one aggregate statement, a row per role and side."""
        stale = func.sum(case((Client.last_seen <= stale_before, 1), else_=0))
        stmt = (
            select(Client.role, Client.gray, Client.lane, func.count(), stale)
            .where(Client.group_id == group_id, Client.last_seen > seen_after)
            .group_by(Client.role, Client.gray, Client.lane)
        )
        if role is not None:
            stmt = stmt.where(Client.role == role)
        return [(r, bool(gray), lane, int(count), int(stale or 0)) for r, gray, lane, count, stale
                in self.session.execute(stmt)]

    def live_counts(self, seen_after: datetime) -> list[tuple[str, str, bool, str | None, int]]:
        """(group, role, reported gray, reported lane, count) of live clients across every group (the lane as
        stored: ``NULL`` with a true flag is ``gray``)."""
        stmt = (
            select(Group.name, Client.role, Client.gray, Client.lane, func.count())
            .join(Group, Group.id == Client.group_id)
            .where(Client.last_seen > seen_after)
            .group_by(Group.name, Client.role, Client.gray, Client.lane)
        )
        return [
            (name, role, bool(gray), lane, int(count)) for name, role, gray, lane, count in self.session.execute(stmt)
        ]

    def live_health(self, seen_after: datetime) -> list[tuple[str, dict[str, Any]]]:
        """(group, reported health) of every live client that reports one."""
        stmt = (
            select(Group.name, Client.health)
            .join(Group, Group.id == Client.group_id)
            .where(Client.last_seen > seen_after, Client.health.is_not(None))
        )
        return [(name, health) for name, health in self.session.execute(stmt) if health]

    def live_health_texts(self, seen_after: datetime) -> list[tuple[str, str, bool | None, str | None, str]]:
        """(group, client id, its reported gray flag and lane, reported health as JSON text) of every live client
        that reports one: the text, so a reader decodes only the reports that changed."""
        stmt = (
            select(Group.name, Client.client_id, Client.gray, Client.lane, cast(Client.health, Text))
            .join(Group, Group.id == Client.group_id)
            .where(Client.last_seen > seen_after, Client.health.is_not(None))
        )
        return [(name, client_id, gray, lane, text) for name, client_id, gray, lane, text in self.session.execute(stmt)]
