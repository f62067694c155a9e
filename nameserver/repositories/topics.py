"""Configured topics."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from sqlalchemy import delete, exists, func, select
from sqlalchemy.orm import Session

from graymq.nameserver.db import upsert_insert
from graymq.nameserver.models import Client, Group, Topic
from graymq.nameserver.schemas import TopicConfig


class TopicRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, name: str, *, lock: bool = False) -> Topic | None:
        """The topic, optionally locked ``FOR NO KEY UPDATE`` until the transaction ends (as a group's row:
        ``GroupRepository.get``)."""
        stmt = select(Topic).where(Topic.name == name)
        return self.session.scalars(stmt.with_for_update(key_share=True) if lock else stmt).one_or_none()

    def all(self) -> Sequence[Topic]:
        return self.session.scalars(select(Topic).order_by(Topic.name)).all()

    def by_names(self, names: Iterable[str]) -> Sequence[Topic]:
        return self.session.scalars(select(Topic).where(Topic.name.in_(list(names)))).all()

    def add_missing(self, configs: Sequence[TopicConfig]) -> set[str]:
        """Insert the topics not configured yet, leaving existing ones as they are; returns the new names."""
        if not configs:
            return set()
        stmt = upsert_insert(self.session, Topic).values(
            [
                {
                    "name": c.topic,
                    "queue_nums": c.queue_nums,
                    "gray_queue_nums": c.gray_queue_nums,
                    "perm": c.perm,
                    "lane_slots": c.lane_slots,
                }
                for c in configs
            ]
        )
        stmt = stmt.on_conflict_do_nothing(index_elements=[Topic.name]).returning(Topic.name)
        return set(self.session.scalars(stmt))

    def grow_slots(self, configs: Sequence[TopicConfig]) -> bool:
        """Record the lane slots brokers grew their groups' retry and dead-letter topics to (never fewer, the same
        base and gray counts); returns whether a topic grew."""
        grown = False
        topics = {t.name: t for t in self.by_names(c.topic for c in configs)} if configs else {}  # one statement
        for config in configs:
            topic = topics.get(config.topic)
            if (topic is not None and config.lane_slots > topic.lane_slots
                    and (topic.queue_nums, topic.gray_queue_nums) == (config.queue_nums, config.gray_queue_nums)):
                topic.lane_slots = config.lane_slots
                grown = True
        return grown

    def delete(self, names: Iterable[str]) -> None:
        self.session.execute(delete(Topic).where(Topic.name.in_(list(names))))

    def live_users(self, topic: str, seen_after: datetime) -> list[tuple[str, str, str]]:
        """(group, client id, role) of every live client that reports using ``topic``."""
        stmt = (
            select(Group.name, Client.client_id, Client.role, Client.topics)
            .join(Group, Group.id == Client.group_id)
            .where(Client.last_seen > seen_after)
            .order_by(Group.name, Client.client_id, Client.role)
        )
        return [(group, client_id, role) for group, client_id, role, topics in self.session.execute(stmt)
                if topic in (topics or [])]

    def groups_using(self, topic: str, seen_after: datetime) -> set[str]:
        """Names of the groups with a live client that reports using ``topic``, found in the database (JSONB
        containment on PostgreSQL, ``json_each`` on SQLite): one statement returning names only, however many
        clients the groups have."""
        if self.session.get_bind().dialect.name == "postgresql":
            uses = Client.topics.op("@>")(func.jsonb_build_array(topic))
        else:
            each = func.json_each(Client.topics).table_valued("value")
            uses = exists(select(1).select_from(each).where(each.c.value == topic))
        stmt = (select(Group.name).distinct().join(Client, Client.group_id == Group.id)
                .where(Client.last_seen > seen_after, uses))
        return set(self.session.scalars(stmt))

    def live_clients_of(self, topic: str, seen_after: datetime) -> list[tuple[Client, Group]]:
        """(client, its group) of every live client that reports using ``topic``, by group, client id and role."""
        stmt = (
            select(Client, Group)
            .join(Group, Group.id == Client.group_id)
            .where(Client.last_seen > seen_after)
            .order_by(Group.name, Client.client_id, Client.role)
        )
        return [(client, group) for client, group in self.session.execute(stmt) if topic in (client.topics or [])]
