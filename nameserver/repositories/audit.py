"""The audit log: append and query."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from graymq.nameserver.models import AuditEntry


class AuditRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def add(self, entry: AuditEntry) -> None:
        self.session.add(entry)

    def query(
        self,
        *,
        group: str | None = None,
        object_type: str | None = None,
        object_id: str | None = None,
        limit: int = 100,
    ) -> Sequence[AuditEntry]:
        """Matching entries, newest first."""
        stmt = select(AuditEntry)
        if group is not None:
            stmt = stmt.where(AuditEntry.group_name == group)
        if object_type is not None:
            stmt = stmt.where(AuditEntry.object_type == object_type)
        if object_id is not None:
            stmt = stmt.where(AuditEntry.object_id == object_id)
        return self.session.scalars(stmt.order_by(AuditEntry.id.desc()).limit(limit)).all()
