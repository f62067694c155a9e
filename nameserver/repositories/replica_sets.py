"""Broker sets (replicas of one broker name) and their replicas, as their heartbeats describe them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from graymq.nameserver.db import upsert_insert
from graymq.nameserver.models import BrokerReplica, BrokerSet


class ReplicaSetRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def upsert_replica(self, broker_name: str, replica_id: int, address: str, log_end_offset: int, now: datetime,
                       lease_expires_at: datetime) -> None:
        stmt = upsert_insert(self.session, BrokerReplica).values(
            broker_name=broker_name, replica_id=replica_id, address=address, log_end_offset=log_end_offset,
            last_heartbeat=now, lease_expires_at=lease_expires_at,
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=[BrokerReplica.broker_name, BrokerReplica.replica_id],
            set_={name: getattr(stmt.excluded, name)
                  for name in ("address", "log_end_offset", "last_heartbeat", "lease_expires_at")},
        )
        self.session.execute(stmt)

    def expire_replica(self, broker_name: str, replica_id: int, address: str, now: datetime) -> None:
        """End the lease of the replica if it is at ``address`` (it stopped: it is no longer live)."""
        self.session.execute(
            update(BrokerReplica)
            .where(BrokerReplica.broker_name == broker_name, BrokerReplica.replica_id == replica_id,
                   BrokerReplica.address == address, BrokerReplica.lease_expires_at > now)
            .values(lease_expires_at=now)
        )

    def set_of(self, broker_name: str, *, lock: bool = False) -> BrokerSet | None:
        """The set's row; ``lock``: FOR UPDATE, so elections and in-sync changes of one set run one at a time."""
        stmt = select(BrokerSet).where(BrokerSet.broker_name == broker_name)
        if lock:
            stmt = stmt.with_for_update()
        return self.session.scalars(stmt).one_or_none()

    def add_set(self, row: BrokerSet) -> BrokerSet:
        self.session.add(row)
        self.session.flush()
        return row

    def replicas_of(self, broker_names: Sequence[str]) -> Sequence[BrokerReplica]:
        stmt = (select(BrokerReplica).where(BrokerReplica.broker_name.in_(list(broker_names)))
                .order_by(BrokerReplica.broker_name, BrokerReplica.replica_id))
        return self.session.scalars(stmt).all()

    def sets_of(self, broker_names: Sequence[str]) -> Sequence[BrokerSet]:
        return self.session.scalars(select(BrokerSet).where(BrokerSet.broker_name.in_(list(broker_names)))).all()
