"""Gray rules of groups, and the rules of every group (``group_id`` ``NULL``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from graymq.nameserver.models import GrayRule


def _of(group_id: int | None) -> Any:
    """The condition selecting the rules of ``group_id`` (``None``: the all-groups rules)."""
    return GrayRule.group_id.is_(None) if group_id is None else GrayRule.group_id == group_id


class RuleRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def of_group(self, group_id: int | None) -> Sequence[GrayRule]:
        """The group's rules (``None``: the all-groups rules) in evaluation order."""
        stmt = select(GrayRule).where(_of(group_id)).order_by(GrayRule.position, GrayRule.id)
        return self.session.scalars(stmt).all()

    def applying_to(self, group_id: int) -> Sequence[GrayRule]:
        """Every rule a client of the group meets, in one statement: the group's own in order, then the all-groups
        rules in order (a rule of the group wins over an all-groups rule)."""
        stmt = (select(GrayRule).where(or_(GrayRule.group_id == group_id, GrayRule.group_id.is_(None)))
                .order_by(GrayRule.group_id.is_(None), GrayRule.position, GrayRule.id))
        return self.session.scalars(stmt).all()

    def applying_to_groups(self, group_ids: Iterable[int]) -> dict[int, list[GrayRule]]:
        """``applying_to`` of each of ``group_ids``, in one statement."""
        ids = sorted(set(group_ids))
        stmt = (select(GrayRule).where(or_(GrayRule.group_id.in_(ids), GrayRule.group_id.is_(None)))
                .order_by(GrayRule.position, GrayRule.id))
        own: dict[int | None, list[GrayRule]] = {}
        for rule in self.session.scalars(stmt):
            own.setdefault(rule.group_id, []).append(rule)
        return {group_id: own.get(group_id, []) + own.get(None, []) for group_id in ids}

    def get(self, group_id: int | None, rule_id: int) -> GrayRule | None:
        return self.session.scalars(select(GrayRule).where(_of(group_id), GrayRule.id == rule_id)).one_or_none()

    def next_position(self, group_id: int | None) -> int:
        last = self.session.scalar(select(func.max(GrayRule.position)).where(_of(group_id)))
        return 0 if last is None else int(last) + 1

    def add(self, rule: GrayRule) -> GrayRule:
        self.session.add(rule)
        self.session.flush()
        return rule

    def delete(self, rule: GrayRule) -> None:
        self.session.delete(rule)
        self.session.flush()
