"""Recording and reading the audit log."""

from __future__ import annotations

from typing import Any

from fastapi.encoders import jsonable_encoder
from sqlalchemy.orm import Session

from graymq.nameserver.clock import utc_now
from graymq.nameserver.models import AuditEntry
from graymq.nameserver.repositories.audit import AuditRepository
from graymq.nameserver.schemas import AuditView
from graymq.nameserver.watch import mark_changed


class AuditService:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.audit = AuditRepository(session)

    def record(
        self,
        *,
        actor: str,
        object_type: str,
        object_id: str | int,
        action: str,
        group: str | None = None,
        before: Any = None,
        after: Any = None,
        reason: str | None = None,
    ) -> None:
        """Append one entry in the caller's transaction (it commits with the change it describes); the
        watchers of ``group`` wake once it commits."""
        if group is not None:
            mark_changed(self.session, group)
        self.audit.add(
            AuditEntry(
                actor=actor,
                at=utc_now(),
                object_type=object_type,
                object_id=str(object_id),
                group_name=group,
                action=action,
                before=jsonable_encoder(before),
                after=jsonable_encoder(after),
                reason=reason,
            )
        )

    def query(
        self, *, group: str | None, object_type: str | None, object_id: str | None, limit: int
    ) -> list[AuditView]:
        entries = self.audit.query(group=group, object_type=object_type, object_id=object_id, limit=limit)
        return [AuditView.model_validate(entry) for entry in entries]
