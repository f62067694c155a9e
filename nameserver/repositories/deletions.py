"""The deletion log: topics and groups operators deleted, in order."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from graymq.nameserver.models import Deletion


class DeletionRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def add(self, kind: str, name: str, now: datetime) -> None:
        self.session.add(Deletion(kind=kind, name=name, deleted_at=now))

    def after(self, applied_id: int) -> Sequence[Deletion]:
        """Deletions newer than ``applied_id``, oldest first."""
        stmt = select(Deletion).where(Deletion.id > applied_id).order_by(Deletion.id)
        return self.session.scalars(stmt).all()

    def last_id(self) -> int:
        return int(self.session.scalar(select(func.max(Deletion.id))) or 0)
