"""Groups (gray switch, orphan policy)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from graymq.nameserver.db import upsert_insert
from graymq.nameserver.models import Group


class GroupRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, name: str, *, lock: bool = False) -> Group | None:
        """The group, optionally locked until the transaction ends: ``FOR NO KEY UPDATE``, which serializes the
        group's flips and cutovers but not the rows that refer to it (a heartbeat holding its client row inserts a
        ``group_lanes`` row, whose key share on the group's row ``FOR UPDATE`` would wait for: a deadlock)."""
        stmt = select(Group).where(Group.name == name)
        return self.session.scalars(stmt.with_for_update(key_share=True) if lock else stmt).one_or_none()

    def ensure(self, name: str, gray_switch: bool, *, lock: bool = False) -> Group:
        """The group, created with ``gray_switch`` when missing (safe when replicas race to create it).

        Read first: every client heartbeat ensures its group, which nearly always exists, and the insert it
        would otherwise try each time cost a fifth of the name server's CPU per heartbeat."""
        group = self.get(name, lock=lock)
        if group is not None:
            return group
        stmt = upsert_insert(self.session, Group).values(
            name=name, gray_switch=gray_switch, orphan_policy="hold"
        )
        self.session.execute(stmt.on_conflict_do_nothing(index_elements=[Group.name]))
        group = self.get(name, lock=lock)
        assert group is not None
        return group

    def ensure_many(self, names: Iterable[str], gray_switch: bool) -> dict[str, Group]:
        """``ensure`` of each of ``names`` (none locked), by name: one statement when they all exist."""
        wanted = sorted(set(names))
        groups = self.get_many(wanted)
        missing = [name for name in wanted if name not in groups]
        if missing:
            stmt = upsert_insert(self.session, Group).values(
                [{"name": name, "gray_switch": gray_switch, "orphan_policy": "hold"} for name in missing])
            self.session.execute(stmt.on_conflict_do_nothing(index_elements=[Group.name]))
            groups.update(self.get_many(missing))
        return groups

    def get_many(self, names: Iterable[str]) -> dict[str, Group]:
        """The groups of ``names`` that exist, by name (one statement, none locked)."""
        wanted = sorted(set(names))
        return {g.name: g for g in self.session.scalars(select(Group).where(Group.name.in_(wanted)))} if wanted else {}

    def all(self) -> Sequence[Group]:
        return self.session.scalars(select(Group).order_by(Group.name)).all()

    def delete(self, group: Group) -> None:
        """Delete the group; its clients, rules and cutover records go with it (ON DELETE CASCADE)."""
        self.session.execute(delete(Group).where(Group.id == group.id))
