"""Saying loudly that a broker set runs with fewer copies than it has replicas.

The name server's answer to a replica heartbeat lists every replica of the set it knows, each with whether it is in
sync. A replica left out of the in-sync set is not waited for: a sync send is then acknowledged once the in-sync
replicas stored it, by the leader alone when none other is in sync (the set keeps taking writes while a follower is
down, and a replica that is not in sync can never be elected, so nothing acknowledged is lost by an election). The
leader says so at WARNING, once per ``WARN_EVERY_S`` while it lasts, naming each replica and its lag, and every
replica keeps the count for ``graymq_broker_replica_out_of_sync``.
"""

from __future__ import annotations

import logging
from typing import Any

from graymq.broker_ext.replication.role import ReplicaRole
from graymq.protocol.retry import ThrottledLog

log = logging.getLogger(__name__)

WARN_EVERY_S = 30.0


class ReplicaHealth:
    def __init__(self) -> None:
        self._log = ThrottledLog(log, WARN_EVERY_S)
        self._warned = False

    def observe(self, role: ReplicaRole, answer: dict[str, Any]) -> None:
        """Take the name server's view of the set from ``answer``; on the leader, warn while a replica is not in
        sync, and say when every replica is again."""
        lagging = [r for r in answer.get("replicas", ()) if isinstance(r, dict) and not r.get("in_sync", True)]
        role.out_of_sync = tuple(sorted(int(r["replica_id"]) for r in lagging))
        if not role.leads:
            return
        if lagging:
            copies = len(role.in_sync) or 1
            replicas = "; ".join(
                f"replica {r['replica_id']} ({'live' if r.get('live') else 'not reporting'}, "
                f"{r.get('lag_bytes', '?')} bytes behind)" for r in lagging)
            consequence = (f"sync sends are acknowledged with {copies} cop{'y' if copies == 1 else 'ies'}"
                           if role.sync else "a failover cannot pick it")
            self._log.log(logging.WARNING, role.out_of_sync,
                          "broker set %s epoch %d: not in sync: %s; %s until it catches up (its log says why, e.g. "
                          "'invalid token' fetching from this leader)", role.name, role.epoch, replicas, consequence)
            self._warned = True
        elif self._warned:
            log.info("broker set %s epoch %d: every replica is in sync again (%s)", role.name, role.epoch,
                     sorted(role.in_sync))
            self._warned = False
