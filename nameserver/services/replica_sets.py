"""Leader election for broker sets: a lease with an epoch (the fencing token) per set, held in the database.

A set is the brokers started with one ``--name`` and distinct ``--replica-id``s and ``--replication sync|async``;
each replica heartbeats ``POST /v1/brokers/replicas/heartbeat`` every quarter lease. The rules, each applied under
the set's row lock (one transaction: SQLite serializes writers, PostgreSQL locks the row), so several name servers
on one database agree:

- The first replica to report creates the set and leads it at epoch 1; its in-sync set is itself.
- The leader's heartbeat renews its lease only when it carries the set's epoch. It may change the in-sync set
  (what it proposes is taken as is: compare-and-set on the epoch, the leader always in it); a follower it
  leaves out can no longer be elected, and the leader stops waiting for it only once this is stored.
- A lease that expired is taken over by the first *in-sync* follower to report: epoch + 1, its log end becomes
  the epoch's start offset (every replica truncates what it holds past it), its in-sync set is itself.
- A leader that restarted (it reports epoch 0: it knows nothing) is not trusted with its lease: an in-sync
  follower takes over at once; with none, it leads again at a new epoch.
- The set's route (``brokers`` row) points at the leader, so clients follow a change at their next route read.

Every election and in-sync change is written to the audit log (object type ``broker_set``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from graymq.nameserver.clock import utc_now
from graymq.nameserver.models import BrokerReplica, BrokerSet
from graymq.nameserver.repositories.brokers import BrokerRepository
from graymq.nameserver.repositories.replica_sets import ReplicaSetRepository
from graymq.nameserver.schemas import ReplicaHeartbeat, ReplicaSetView, ReplicaView
from graymq.nameserver.services.audit import AuditService
from graymq.nameserver.services.route_lease import broker_lease_s
from graymq.nameserver.settings import NameServerSettings
from graymq.nameserver.watch import BROKER_REGISTERED, mark_changed

log = logging.getLogger(__name__)

ACTOR = "nameserver"



class ReplicaSetService:
    def __init__(self, session: Session, settings: NameServerSettings) -> None:
        self.session = session
        self.settings = settings
        self.repo = ReplicaSetRepository(session)
        self.brokers = BrokerRepository(session)
        self.audit = AuditService(session)

    def heartbeat(self, report: ReplicaHeartbeat) -> ReplicaSetView:
        now = utc_now()
        lease = timedelta(seconds=self.settings.replica_lease_seconds)
        self.repo.upsert_replica(report.broker_name, report.replica_id, report.address, report.log_end_offset, now,
                                 now + lease)
        row = self.repo.set_of(report.broker_name, lock=True)
        me = report.replica_id
        if row is None:
            row = self.repo.add_set(BrokerSet(
                broker_name=report.broker_name, replication=report.replication, epoch=0, leader_replica_id=me,
                leader_lease_expires_at=now, in_sync=[me], epoch_start_offset=0, leader_log_end=0))
            self._elect(row, report, now, lease, "first replica of the set")
        elif row.leader_replica_id == me:
            if report.epoch == row.epoch:
                row.leader_lease_expires_at = now + lease
                row.leader_log_end = report.log_end_offset
                if report.in_sync is not None:
                    self._change_in_sync(row, sorted({*report.in_sync, me}))
                self._route_to(report.broker_name, report.address, now)
            else:
                self._leader_restarted(row, report, now, lease)
        elif now >= row.leader_lease_expires_at and me in row.in_sync:
            self._elect(row, report, now, lease, f"the lease of replica {row.leader_replica_id} expired")
        self.session.commit()
        return self.view(row, now)

    def _leader_restarted(self, row: BrokerSet, report: ReplicaHeartbeat, now: datetime, lease: timedelta) -> None:
        """The leader reports another epoch: it restarted (or was cut off and forgot). Prefer a live in-sync
        follower, which holds everything acknowledged; lead again only when there is none."""
        live = {r.replica_id: r for r in self.repo.replicas_of([row.broker_name]) if r.lease_expires_at > now}
        follower = next((live[i] for i in row.in_sync if i != row.leader_replica_id and i in live), None)
        if follower is not None:
            self._elect(row, follower, now, lease, f"leader {row.leader_replica_id} restarted")
            return
        reason = f"leader {row.leader_replica_id} restarted and no in-sync follower is live"
        if report.log_end_offset < row.leader_log_end:
            reason += (f"; its log ends at {report.log_end_offset}, before the {row.leader_log_end} it last "
                       "reported: messages past it are lost")
            log.error("broker set %s: %s", row.broker_name, reason)
        self._elect(row, report, now, lease, reason)

    def _elect(self, row: BrokerSet, leader: ReplicaHeartbeat | BrokerReplica, now: datetime, lease: timedelta,
               why: str) -> None:
        """``leader`` (its replica id, address and log end: as reported now, or as last reported) leads at the next
        epoch."""
        before = {"epoch": row.epoch, "leader": row.leader_replica_id, "in_sync": list(row.in_sync)}
        row.epoch += 1
        row.leader_replica_id = leader.replica_id
        row.in_sync = [leader.replica_id]
        row.epoch_start_offset = row.leader_log_end = leader.log_end_offset
        row.leader_lease_expires_at = now + lease
        row.elected_at = now
        self._route_to(row.broker_name, leader.address, now)
        mark_changed(self.session, BROKER_REGISTERED)
        self.audit.record(actor=ACTOR, object_type="broker_set", object_id=row.broker_name, action="elect",
                          before=before, after={"epoch": row.epoch, "leader": row.leader_replica_id,
                                                "epoch_start_offset": row.epoch_start_offset}, reason=why)
        log.warning("broker set %s: replica %d leads at epoch %d from offset %d (%s)", row.broker_name,
                    row.leader_replica_id, row.epoch, row.epoch_start_offset, why)

    def _route_to(self, broker_name: str, address: str, now: datetime) -> None:
        """The set's route points at its leader, with a broker's lease (renewed by the leader's heartbeats, every
        quarter replica lease)."""
        lease = broker_lease_s(self.settings, self.settings.replica_lease_seconds / 4)
        self.brokers.set_address(broker_name, address, now, now + timedelta(seconds=lease))

    def _change_in_sync(self, row: BrokerSet, in_sync: list[int]) -> None:
        if in_sync == sorted(row.in_sync):
            return
        self.audit.record(actor=ACTOR, object_type="broker_set", object_id=row.broker_name, action="in_sync",
                          before={"epoch": row.epoch, "in_sync": list(row.in_sync)},
                          after={"epoch": row.epoch, "in_sync": in_sync},
                          reason=f"proposed by leader {row.leader_replica_id}")
        log.info("broker set %s epoch %d: in-sync replicas %s -> %s", row.broker_name, row.epoch, row.in_sync,
                 in_sync)
        row.in_sync = in_sync

    def view(self, row: BrokerSet, now: datetime) -> ReplicaSetView:
        replicas = self.repo.replicas_of([row.broker_name])
        return set_view(row, replicas, now, self.settings.replica_lease_seconds)

    def views(self, broker_names: list[str]) -> dict[str, ReplicaSetView]:
        """The sets among ``broker_names`` (a broker without replicas has none)."""
        now = utc_now()
        replicas = self.repo.replicas_of(broker_names)
        return {row.broker_name: set_view(row, [r for r in replicas if r.broker_name == row.broker_name], now,
                                          self.settings.replica_lease_seconds)
                for row in self.repo.sets_of(broker_names)}


def set_view(row: BrokerSet, replicas: Sequence[BrokerReplica], now: datetime, lease_seconds: float) -> ReplicaSetView:
    leader_end = row.leader_log_end
    by_id = {r.replica_id: r for r in replicas}
    leader = by_id.get(row.leader_replica_id)
    return ReplicaSetView(
        broker_name=row.broker_name, replication=row.replication, epoch=row.epoch,
        leader_replica_id=row.leader_replica_id, leader_address=leader.address if leader else "",
        in_sync=sorted(row.in_sync), epoch_start_offset=row.epoch_start_offset, lease_seconds=lease_seconds,
        leader_lease_expires_at=row.leader_lease_expires_at,
        replicas=[ReplicaView(replica_id=r.replica_id, address=r.address, leader=r.replica_id == row.leader_replica_id,
                              in_sync=r.replica_id in row.in_sync, live=r.lease_expires_at > now,
                              log_end_offset=r.log_end_offset, lag_bytes=max(0, leader_end - r.log_end_offset),
                              last_heartbeat=r.last_heartbeat) for r in replicas],
    )
