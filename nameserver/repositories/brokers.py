"""Brokers and the topic routes they report."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Row, case, delete, func, select, update
from sqlalchemy.orm import Session

from graymq.nameserver.db import upsert_insert
from graymq.nameserver.models import Broker, BrokerTopicRoute
from graymq.nameserver.schemas import TopicConfig


class BrokerRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def upsert(self, broker_name: str, address: str, now: datetime, lease_expires_at: datetime,
               grpc_address: str | None = None, *, keep_grpc: bool = False) -> int:
        """Record a heartbeat (``grpc_address``: the broker's gRPC endpoint, ``None``: none; ``keep_grpc``: the one
        recorded stays while the address does); returns the broker's row id."""
        stmt = upsert_insert(self.session, Broker).values(
            broker_name=broker_name,
            address=address,
            registered_at=now,
            last_heartbeat=now,
            lease_expires_at=lease_expires_at,
            grpc_address=grpc_address,
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=[Broker.broker_name],
            set_={
                "address": stmt.excluded.address,
                "last_heartbeat": stmt.excluded.last_heartbeat,
                "lease_expires_at": stmt.excluded.lease_expires_at,
                "grpc_address": case((Broker.address == stmt.excluded.address, Broker.grpc_address), else_=None)
                if keep_grpc else stmt.excluded.grpc_address,
            },
        ).returning(Broker.id)
        return int(self.session.execute(stmt).scalar_one())

    def registration(self, broker_name: str) -> Row[tuple[str, str | None, datetime]] | None:
        """(address, gRPC address, lease end) of the broker, its row locked until the transaction ends (``None``:
        never registered)."""
        stmt = (select(Broker.address, Broker.grpc_address, Broker.lease_expires_at)
                .where(Broker.broker_name == broker_name).with_for_update())
        return self.session.execute(stmt).one_or_none()

    def set_address(self, broker_name: str, address: str, now: datetime, lease_expires_at: datetime) -> int:
        """Point the broker's route at ``address`` (a broker set's leader) and renew its lease; returns the broker's
        row id. Its gRPC address stays while the address does (the leader's heartbeats renew its route: clearing it
        each time hid the gRPC endpoint from routes until the leader's next registration), and is unknown at a new
        address until that broker registers itself."""
        return self.upsert(broker_name, address, now, lease_expires_at, keep_grpc=True)

    def expire(self, broker_name: str, address: str, now: datetime) -> bool:
        """End the lease of ``broker_name`` if it is routed at ``address`` (a process registered since under the
        name keeps it); whether a live lease ended."""
        result = self.session.execute(
            update(Broker)
            .where(Broker.broker_name == broker_name, Broker.address == address, Broker.lease_expires_at > now)
            .values(lease_expires_at=now)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    def replace_routes(self, broker_id: int, topics: Sequence[TopicConfig]) -> bool:
        """Make the broker's routes exactly ``topics`` (what its latest heartbeat reported); whether they changed
        (routes as they were are left unwritten)."""
        held = self.session.execute(
            select(BrokerTopicRoute.topic, BrokerTopicRoute.queue_nums, BrokerTopicRoute.gray_queue_nums,
                   BrokerTopicRoute.perm, BrokerTopicRoute.lane_slots).where(BrokerTopicRoute.broker_id == broker_id))
        if {row[0]: tuple(row[1:]) for row in held} == {
                t.topic: (t.queue_nums, t.gray_queue_nums, t.perm, t.lane_slots) for t in topics}:
            return False
        names = [t.topic for t in topics]
        self.session.execute(
            delete(BrokerTopicRoute).where(
                BrokerTopicRoute.broker_id == broker_id, BrokerTopicRoute.topic.not_in(names)
            )
        )
        if not topics:
            return True
        stmt = upsert_insert(self.session, BrokerTopicRoute).values(
            [
                {
                    "broker_id": broker_id,
                    "topic": t.topic,
                    "queue_nums": t.queue_nums,
                    "gray_queue_nums": t.gray_queue_nums,
                    "perm": t.perm,
                    "lane_slots": t.lane_slots,
                }
                for t in topics
            ]
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=[BrokerTopicRoute.broker_id, BrokerTopicRoute.topic],
            set_={
                "queue_nums": stmt.excluded.queue_nums,
                "gray_queue_nums": stmt.excluded.gray_queue_nums,
                "perm": stmt.excluded.perm,
                "lane_slots": stmt.excluded.lane_slots,
            },
        )
        self.session.execute(stmt)
        return True

    def lock_all(self) -> None:
        """Lock every broker row until the transaction ends: a registration in flight finishes first, and the
        next ones wait, so none records a topic this transaction deletes."""
        self.session.execute(select(Broker.id).order_by(Broker.id).with_for_update()).all()

    def delete_routes_of(self, topics: Sequence[str]) -> None:
        """Forget every broker's route of ``topics`` (deleted: no longer served)."""
        self.session.execute(delete(BrokerTopicRoute).where(BrokerTopicRoute.topic.in_(list(topics))))

    def live(self, now: datetime) -> Sequence[Broker]:
        return self.session.scalars(
            select(Broker).where(Broker.lease_expires_at > now).order_by(Broker.broker_name)
        ).all()

    def count_live(self, now: datetime) -> int:
        return int(self.session.scalar(select(func.count()).where(Broker.lease_expires_at > now)) or 0)

    def live_routes(
        self, now: datetime, topic: str | None = None
    ) -> Sequence[tuple[Broker, BrokerTopicRoute]]:
        """(broker, route) pairs of live brokers, for one topic or all, by broker name."""
        stmt = (
            select(Broker, BrokerTopicRoute)
            .join(BrokerTopicRoute, BrokerTopicRoute.broker_id == Broker.id)
            .where(Broker.lease_expires_at > now)
            .order_by(Broker.broker_name, BrokerTopicRoute.topic)
        )
        if topic is not None:
            stmt = stmt.where(BrokerTopicRoute.topic == topic)
        return [(broker, route) for broker, route in self.session.execute(stmt)]
