"""A broker's place in its broker set: which epoch it knows, who leads, who is in sync — and whether it may write.

A broker without ``--replication`` is a set of one: it always leads and never asks. A replica does not know its
role until the name server answers its first replica heartbeat; until then, and while it follows, it refuses
every request that writes (``NOT_LEADER``: clients read the route again, which names the leader). The epoch it
last knew is kept in the store's config, so a restart does not look like a lost store to the name server.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from graymq.broker_ext.store.atomic_file import read_json, write_json_atomic
from graymq.protocol.errors import NotLeaderError


@dataclass
class ReplicaRole:
    name: str
    replica_id: int = 0
    replication: str | None = None  # "sync" / "async"; None: no replicas
    epoch: int = 0
    leader_id: int | None = None
    leader_address: str = ""
    in_sync: frozenset[int] = frozenset()
    out_of_sync: tuple[int, ...] = ()  # the set's replicas the name server last listed as not in sync
    epoch_start_offset: int = 0
    leading_since: float = field(default_factory=time.monotonic)
    moved_aside_bytes: int = 0  # what this replica held past new leaders' logs, moved aside
    lease_ends_at: float = 0.0  # monotonic: a replicated leader acknowledges nothing from then on (``fence``)
    path: Path | None = None  # where the epoch is kept

    def __post_init__(self) -> None:
        if self.path is not None:
            self.epoch = int(read_json(self.path, {"epoch": 0})["epoch"])

    @property
    def replicated(self) -> bool:
        return self.replication is not None

    @property
    def leads(self) -> bool:
        return not self.replicated or self.leader_id == self.replica_id

    @property
    def sync(self) -> bool:
        return self.replication == "sync"

    def fence(self) -> None:
        """Before every request that writes (``writes`` in broker_ext/processors/methods.py): refuse
        (``NOT_LEADER``) unless this replica leads inside its lease, read on its own monotonic clock now: a leader
        paused past its lease learns it on waking, before it acknowledges anything."""
        if not self.leads:
            raise NotLeaderError(self.not_leader_text())
        if self.replicated and time.monotonic() >= self.lease_ends_at:
            raise NotLeaderError(
                f"broker {self.name} replica {self.replica_id}: its leader lease at epoch {self.epoch} ran out "
                "before the name server renewed it (another replica may lead): read the route again")

    def not_leader_text(self) -> str:
        if self.leader_id is None:
            return (f"broker {self.name} replica {self.replica_id} does not know its set's leader yet: read the "
                    "route again")
        return (f"broker {self.name} replica {self.replica_id} follows replica {self.leader_id} "
                f"({self.leader_address}) at epoch {self.epoch}: writes go to the leader (read the route again)")

    def know_epoch(self, epoch: int) -> None:
        """Remember ``epoch`` (written before acting on it: a restart resumes under it)."""
        if epoch != self.epoch and self.path is not None:
            write_json_atomic(self.path, {"epoch": epoch})
        self.epoch = epoch
