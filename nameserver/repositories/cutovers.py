"""Cutover operations (promote, rollback)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session, joinedload

from graymq.nameserver.models import RUNNING, CutoverOperation, Group


class CutoverRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def running(self, group_id: int, lane: str | None = None) -> CutoverOperation | None:
        """The group's RUNNING operation of ``lane`` (None: of any lane, the oldest)."""
        stmt = (select(CutoverOperation).options(joinedload(CutoverOperation.group))
                .where(CutoverOperation.group_id == group_id, CutoverOperation.state == RUNNING))
        if lane is not None:
            stmt = stmt.where(CutoverOperation.lane == lane)
        return self.session.scalars(stmt.order_by(CutoverOperation.id)).first()

    def all_running(self, group_id: int) -> Sequence[CutoverOperation]:
        """The group's RUNNING operations, one per lane at most."""
        return self.session.scalars(
            select(CutoverOperation).options(joinedload(CutoverOperation.group))
            .where(CutoverOperation.group_id == group_id, CutoverOperation.state == RUNNING)
            .order_by(CutoverOperation.id)
        ).all()

    def get(self, operation_id: int, *, lock: bool = False) -> CutoverOperation | None:
        stmt = (
            select(CutoverOperation)
            .options(joinedload(CutoverOperation.group))
            .where(CutoverOperation.id == operation_id)
        )
        return self.session.scalars(stmt.with_for_update(of=CutoverOperation) if lock else stmt).one_or_none()

    def of_group(self, group_id: int, state: str | None = None) -> Sequence[CutoverOperation]:
        """The group's operations, newest first."""
        stmt = (
            select(CutoverOperation)
            .options(joinedload(CutoverOperation.group))
            .where(CutoverOperation.group_id == group_id)
        )
        if state is not None:
            stmt = stmt.where(CutoverOperation.state == state)
        return self.session.scalars(stmt.order_by(CutoverOperation.id.desc())).all()

    def counts(self) -> Sequence[tuple[str, str, str, int]]:
        """``(group name, kind, state, operations)`` for every group that has recorded one."""
        stmt = (
            select(Group.name, CutoverOperation.kind, CutoverOperation.state, func.count())
            .join(Group, Group.id == CutoverOperation.group_id)
            .group_by(Group.name, CutoverOperation.kind, CutoverOperation.state)
        )
        return [(name, kind, state, count) for name, kind, state, count in self.session.execute(stmt)]

    def add(self, operation: CutoverOperation) -> CutoverOperation:
        self.session.add(operation)
        self.session.flush()
        return operation
