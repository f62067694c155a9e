"""Lane slots of topics and groups' records of lanes (docs/lanes.md)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from graymq.nameserver.db import upsert_insert
from graymq.nameserver.models import GroupLane, LaneSlot, Topic


class LaneRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def all_slots(self) -> list[tuple[str, int, str]]:
        """(topic, slot, lane) of every slot a lane holds, by topic then slot: one statement, a small table."""
        stmt = (select(Topic.name, LaneSlot.slot, LaneSlot.lane).join(Topic, Topic.id == LaneSlot.topic_id)
                .order_by(Topic.name, LaneSlot.slot))
        return [(topic, int(slot), lane) for topic, slot, lane in self.session.execute(stmt)]

    def slots_of(self, topic_id: int) -> Sequence[LaneSlot]:
        return self.session.scalars(select(LaneSlot).where(LaneSlot.topic_id == topic_id)
                                    .order_by(LaneSlot.slot)).all()

    def take(self, topic_id: int, slot: int, lane: str, taken_by: str, now: datetime) -> None:
        self.session.add(LaneSlot(topic_id=topic_id, slot=slot, lane=lane, taken_at=now, taken_by=taken_by))
        self.session.flush()

    def give_back(self, topic_id: int, lane: str) -> int | None:
        """Free the lane's slot of the topic; the slot it held (``None``: none)."""
        stmt = delete(LaneSlot).where(LaneSlot.topic_id == topic_id, LaneSlot.lane == lane).returning(LaneSlot.slot)
        return self.session.scalars(stmt).one_or_none()

    def holds_any(self, lane: str) -> bool:
        return bool(self.session.scalar(select(func.count()).where(LaneSlot.lane == lane)))

    def of_group(self, group_id: int) -> Sequence[GroupLane]:
        return self.session.scalars(select(GroupLane).where(GroupLane.group_id == group_id)
                                    .order_by(GroupLane.lane)).all()

    def of_groups(self, group_ids: Iterable[int]) -> dict[int, list[GroupLane]]:
        """``of_group`` of each of ``group_ids`` in one statement (a group with no records is left out)."""
        ids = sorted(set(group_ids))
        by_group: dict[int, list[GroupLane]] = {}
        if ids:
            stmt = select(GroupLane).where(GroupLane.group_id.in_(ids)).order_by(GroupLane.group_id, GroupLane.lane)
            for row in self.session.scalars(stmt):
                by_group.setdefault(row.group_id, []).append(row)
        return by_group

    def join(self, group_id: int, lanes: Iterable[str], now: datetime) -> None:
        """Record that the group takes part in ``lanes`` from ``now`` (kept where it already does)."""
        rows = [{"group_id": group_id, "lane": lane, "joined_at": now} for lane in sorted(set(lanes))]
        if not rows:
            return
        stmt = upsert_insert(self.session, GroupLane).values(rows)
        stmt = stmt.on_conflict_do_update(
            index_elements=[GroupLane.group_id, GroupLane.lane],
            set_={"joined_at": func.coalesce(GroupLane.joined_at, stmt.excluded.joined_at)},
        )
        self.session.execute(stmt)

    def set_orphan_policy(self, group_id: int, lane: str, policy: str | None) -> None:
        stmt = upsert_insert(self.session, GroupLane).values(group_id=group_id, lane=lane, orphan_policy=policy)
        stmt = stmt.on_conflict_do_update(index_elements=[GroupLane.group_id, GroupLane.lane],
                                          set_={"orphan_policy": stmt.excluded.orphan_policy})
        self.session.execute(stmt)

    def set_weight(self, group_id: int, lane: str, weight: int) -> None:
        stmt = upsert_insert(self.session, GroupLane).values(group_id=group_id, lane=lane, weight=weight)
        stmt = stmt.on_conflict_do_update(index_elements=[GroupLane.group_id, GroupLane.lane],
                                          set_={"weight": stmt.excluded.weight})
        self.session.execute(stmt)

    def end_lane(self, lane: str) -> None:
        """The lane ended (it holds no slot any more): no group takes part in it through its clients now."""
        self.session.execute(update(GroupLane).where(GroupLane.lane == lane).values(joined_at=None))
