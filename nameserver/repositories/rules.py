"""Gray rules of groups."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from graymq.nameserver.models import GrayRule


class RuleRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def of_group(self, group_id: int) -> Sequence[GrayRule]:
        """The group's rules in evaluation order."""
        stmt = select(GrayRule).where(GrayRule.group_id == group_id).order_by(GrayRule.position, GrayRule.id)
        return self.session.scalars(stmt).all()

    def get(self, group_id: int, rule_id: int) -> GrayRule | None:
        return self.session.scalars(
            select(GrayRule).where(GrayRule.group_id == group_id, GrayRule.id == rule_id)
        ).one_or_none()

    def next_position(self, group_id: int) -> int:
        last = self.session.scalar(select(func.max(GrayRule.position)).where(GrayRule.group_id == group_id))
        return 0 if last is None else int(last) + 1

    def add(self, rule: GrayRule) -> GrayRule:
        self.session.add(rule)
        self.session.flush()
        return rule

    def delete(self, rule: GrayRule) -> None:
        self.session.delete(rule)
        self.session.flush()
