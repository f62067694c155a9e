"""What the name server's REST API answers, as frozen values: groups, rules and operations; clients, their
heartbeat answers and flags; topics, brokers, principals and the audit log.

``NameServerClient`` converts its JSON answers here (``from_json``); a key a newer name server adds is ignored, so
an older client still reads its answers. ``to_json`` gives the name server's JSON back unchanged, key for key, for
what prints it (``graymq gray history --json``, ``graymq audit --json``, ``graymq gray status --json``...).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from graymq.core.queue_layout import GRAY_LANE
from graymq.protocol.membership import ClientState, OrphanPolicy, Role
from graymq.protocol.operations import CutoverKind, CutoverMode, CutoverState


def _time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def _text(moment: datetime | None) -> str | None:
    """A UTC timestamp as the name server writes it (``...Z``, microseconds only when there are some)."""
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class CutoverRecord:
    """A promote, rollback or rollout as the name server recorded it (``/v1/cutovers/{id}``).

    >>> record = CutoverRecord.from_json({"id": 7, "group": "g", "kind": "promote", "mode": "drain",
    ...     "producer_groups": ["g"], "state": "RUNNING", "step": "drain", "result": None, "started_by": "ops",
    ...     "started_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:01.5Z", "finished_at": None})
    >>> record.kind, record.state.finished, record.updated_at.microsecond
    (<CutoverKind.PROMOTE: 'promote'>, False, 500000)
    >>> record.to_json()["updated_at"]
    '2026-01-01T00:00:01.500000Z'
    """

    id: int
    group: str
    kind: CutoverKind
    mode: CutoverMode
    producer_groups: tuple[str, ...]
    state: CutoverState
    step: str | None
    result: dict[str, Any] | None
    started_by: str
    started_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    lane: str = GRAY_LANE  # the lane it promotes or rolls back

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CutoverRecord:
        return cls(id=int(data["id"]), group=data["group"], kind=CutoverKind(data["kind"]),
                   mode=CutoverMode(data["mode"]), producer_groups=tuple(data["producer_groups"]),
                   state=CutoverState(data["state"]), step=data["step"], result=data["result"],
                   started_by=data["started_by"], started_at=datetime.fromisoformat(data["started_at"]),
                   updated_at=datetime.fromisoformat(data["updated_at"]), finished_at=_time(data["finished_at"]),
                   lane=data.get("lane") or GRAY_LANE)

    def to_json(self) -> dict[str, Any]:
        """As the name server shows it (``lane`` only when not ``gray``)."""
        return {"id": self.id, "group": self.group, "kind": self.kind.value, "mode": self.mode.value,
                "producer_groups": list(self.producer_groups), "state": self.state.value, "step": self.step,
                "result": self.result, "started_by": self.started_by, "started_at": _text(self.started_at),
                "updated_at": _text(self.updated_at), "finished_at": _text(self.finished_at),
                **({"lane": self.lane} if self.lane != GRAY_LANE else {})}


@dataclass(frozen=True)
class GrayRule:
    """A group's label rule (``/v1/groups/{group}/rules``): clients whose labels match ``selector`` get ``gray``."""

    id: int
    group: str
    selector: dict[str, str]
    gray: bool
    position: int
    created_at: datetime
    lane: str = GRAY_LANE  # the lane a true rule puts clients in

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GrayRule:
        return cls(id=int(data["id"]), group=data["group"], selector=dict(data["selector"]), gray=bool(data["gray"]),
                   position=int(data["position"]), created_at=datetime.fromisoformat(data["created_at"]),
                   lane=data.get("lane") or GRAY_LANE)


@dataclass(frozen=True)
class GroupSettings:
    """A consumer group's gray settings (``/v1/groups/{group}`` and what its switch, orphan-policy, weight and
    retired calls answer)."""

    group: str
    gray_switch: bool
    orphan_policy: OrphanPolicy
    gray_weight: int
    gray_retired: bool
    created_at: datetime
    updated_at: datetime
    fifo: bool = False  # stock pop consumers: one message in flight per queue, in order
    max_attempts: int = 16  # stock pop consumers: deliveries before the dead-letter queue

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GroupSettings:
        return cls(group=data["group"], gray_switch=bool(data["gray_switch"]), orphan_policy=data["orphan_policy"],
                   gray_weight=int(data["gray_weight"]), gray_retired=bool(data.get("gray_retired", False)),
                   created_at=datetime.fromisoformat(data["created_at"]),
                   updated_at=datetime.fromisoformat(data["updated_at"]), fifo=bool(data.get("fifo", False)),
                   max_attempts=int(data.get("max_attempts", 16)))

    def to_json(self) -> dict[str, Any]:
        return {"group": self.group, "gray_switch": self.gray_switch, "orphan_policy": self.orphan_policy,
                "gray_weight": self.gray_weight, "gray_retired": self.gray_retired, "fifo": self.fifo,
                "max_attempts": self.max_attempts,
                "created_at": _text(self.created_at), "updated_at": _text(self.updated_at)}


@dataclass(frozen=True)
class GroupSummary:
    """A group as ``GET /v1/groups`` lists it: its settings and how many clients (every role) are registered live."""

    settings: GroupSettings
    live_clients: int

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GroupSummary:
        return cls(settings=GroupSettings.from_json(data), live_clients=int(data["live_clients"]))

    def to_json(self) -> dict[str, Any]:
        return {**self.settings.to_json(), "live_clients": self.live_clients}


@dataclass(frozen=True)
class GroupDetail:
    """One group as ``GET /v1/groups/{group}`` answers: its settings, its rules in order, its running operation."""

    settings: GroupSettings
    rules: tuple[GrayRule, ...]
    running_cutover: CutoverRecord | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GroupDetail:
        running = data.get("running_cutover")
        return cls(settings=GroupSettings.from_json(data), rules=tuple(GrayRule.from_json(r) for r in data["rules"]),
                   running_cutover=None if running is None else CutoverRecord.from_json(running))


@dataclass(frozen=True)
class ClientRecord:
    """A registered client as the name server lists it (``/v1/groups/{group}/clients``): its labels, flags, state,
    the queues and topics it reported, its last consume health report (``protocol.health``) and whether it is stale
    (no heartbeat for a while: presumed gone)."""

    client_id: str
    role: Role
    labels: dict[str, str]
    explicit_gray: bool | None
    declared_gray: bool | None
    desired_gray: bool
    gray: bool
    state: ClientState
    queues: tuple[str, ...]
    topics: tuple[str, ...]
    last_seen: datetime
    health: dict[str, Any] | None = None  # per side, and its "lanes" (protocol.health)
    gray_marks: bool | None = None
    frozen_lanes: tuple[str, ...] | None = None  # producers: lanes whose marks they do not honour now (None: not said)
    principal: str | None = None
    stale: bool = False
    explicit_lane: str | None = None  # the lane its explicit flag names (None: base or no flag)
    declared_lane: str | None = None  # the lane it was started in
    desired_lane: str | None = None  # the lane it should be in (None: base)
    lane: str | None = None  # the lane it reports being in (None: base)

    @property
    def in_lane(self) -> str | None:
        """The lane it reports being in, from before lanes too (a gray client naming none is in ``gray``)."""
        return self.lane or (GRAY_LANE if self.gray else None)

    @property
    def wanted_lane(self) -> str | None:
        """The lane it should be in, from before lanes too."""
        return self.desired_lane or (GRAY_LANE if self.desired_gray else None)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ClientRecord:
        return cls(client_id=data["client_id"], role=data["role"], labels=dict(data["labels"]),
                   explicit_gray=data["explicit_gray"], declared_gray=data.get("declared_gray"),
                   desired_gray=bool(data["desired_gray"]), gray=bool(data["gray"]), state=ClientState(data["state"]),
                   queues=tuple(data["queues"]), topics=tuple(data["topics"]),
                   last_seen=datetime.fromisoformat(data["last_seen"]), health=data.get("health"),
                   gray_marks=data.get("gray_marks"), principal=data.get("principal"),
                   frozen_lanes=None if data.get("frozen_lanes") is None else tuple(data["frozen_lanes"]),
                   stale=bool(data.get("stale", False)), explicit_lane=data.get("explicit_lane"),
                   declared_lane=data.get("declared_lane"), desired_lane=data.get("desired_lane"),
                   lane=data.get("lane"))

    def to_json(self) -> dict[str, Any]:
        return {"client_id": self.client_id, "role": self.role, "labels": self.labels,
                "explicit_gray": self.explicit_gray, "declared_gray": self.declared_gray,
                "desired_gray": self.desired_gray, "gray": self.gray, "state": self.state.value,
                "queues": list(self.queues), "topics": list(self.topics), "last_seen": _text(self.last_seen),
                "health": self.health, "gray_marks": self.gray_marks, "principal": self.principal,
                "stale": self.stale, "explicit_lane": self.explicit_lane, "declared_lane": self.declared_lane,
                "desired_lane": self.desired_lane, "lane": self.lane,
                "frozen_lanes": None if self.frozen_lanes is None else list(self.frozen_lanes)}


@dataclass(frozen=True)
class HeartbeatAnswer:
    """What a client's heartbeat (``POST /v1/clients/heartbeat``) or watch answers: the flag it should have, its
    group's gray settings (switch, orphan policy, weight, retirement, a stock pop consumer's FIFO and deliveries),
    whether a producer honours messages' gray marks, and the queue counts of its topics."""

    group: str
    client_id: str
    role: Role
    gray_switch: bool
    desired_gray: bool
    explicit_gray: bool | None
    gray: bool
    state: ClientState
    orphan_policy: OrphanPolicy
    gray_weight: int
    gray_retired: bool = False
    gray_marks: bool = True  # a name server without the field lets producers honour marks
    lane_marks: bool = True  # marks honoured but those of ``frozen_lanes`` (an answer from before: ``gray_marks``)
    frozen_lanes: tuple[str, ...] = ()  # lanes whose running promote or rollback covers the producer group
    fifo: bool = False
    max_attempts: int = 16
    topics: dict[str, tuple[int, int]] = field(default_factory=dict)  # topic -> (queue_nums, gray_queue_nums)
    desired_lane: str | None = None  # the lane it should be in (an answer from before lanes: ``gray`` when gray)
    lanes: dict[str, dict[str, Any]] = field(default_factory=dict)  # the group's lanes: orphan policy, taking part
    topic_lanes: dict[str, dict[str, int]] = field(default_factory=dict)  # topic -> lane -> the slot it holds

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HeartbeatAnswer:
        return cls(group=data["group"], client_id=data["client_id"], role=data["role"],
                   gray_switch=bool(data["gray_switch"]), desired_gray=bool(data["desired_gray"]),
                   explicit_gray=data["explicit_gray"], gray=bool(data["gray"]), state=ClientState(data["state"]),
                   orphan_policy=data["orphan_policy"], gray_weight=int(data["gray_weight"]),
                   gray_retired=bool(data.get("gray_retired", False)), gray_marks=bool(data.get("gray_marks", True)),
                   lane_marks=bool(data.get("lane_marks", data.get("gray_marks", True))),
                   frozen_lanes=tuple(data.get("frozen_lanes") or ()),
                   fifo=bool(data.get("fifo", False)), max_attempts=int(data.get("max_attempts", 16)),
                   topics={topic: (int(counts["queue_nums"]), int(counts["gray_queue_nums"]))
                           for topic, counts in (data.get("topics") or {}).items()},
                   desired_lane=data["desired_lane"] if "desired_lane" in data else
                   (GRAY_LANE if data["desired_gray"] else None), lanes=dict(data.get("lanes") or {}),
                   topic_lanes={topic: {str(lane): int(slot) for lane, slot in (counts.get("lanes") or {}).items()}
                                for topic, counts in (data.get("topics") or {}).items()})

    def retold(self) -> HeartbeatAnswer:
        """This answer as an alive beat tells it again, later: its watched state holds (a watch carries every change
        of it), its lane maps (``topic_lanes``) are left out. They were true when it came, and a slot taken or given
        back since wakes no watch: told again, an old map would undo a newer one its hearer had from elsewhere."""
        return replace(self, topic_lanes={}) if self.topic_lanes else self


@dataclass(frozen=True)
class GroupClients:
    """A group's gray settings and its registered clients (``/v1/groups/{group}/clients``)."""

    group: str
    gray_switch: bool
    orphan_policy: OrphanPolicy
    gray_weight: int
    gray_retired: bool
    clients: tuple[ClientRecord, ...]
    total: int | None = None  # live clients, listed or not (None: a name server from before pages)
    next_offset: int | None = None  # a page's next one (None: the last, or every client listed)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GroupClients:
        return cls(group=data["group"], gray_switch=bool(data["gray_switch"]), orphan_policy=data["orphan_policy"],
                   gray_weight=int(data["gray_weight"]), gray_retired=bool(data.get("gray_retired", False)),
                   clients=tuple(ClientRecord.from_json(c) for c in data["clients"]), total=data.get("total"),
                   next_offset=data.get("next_offset"))

    @classmethod
    def unknown(cls, group: str) -> GroupClients:
        """A group the name server never heard of: no clients, the defaults a new group gets."""
        return cls(group=group, gray_switch=False, orphan_policy="hold", gray_weight=0, gray_retired=False,
                   clients=())


@dataclass(frozen=True)
class FlagResult:
    """What setting a client's flag answers (``PUT .../clients/{client_id}/flag``): the explicit flag now, and the
    client's registrations (one per role) with the flag each should now have."""

    group: str
    client_id: str
    explicit_gray: bool | None
    clients: tuple[ClientRecord, ...]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FlagResult:
        return cls(group=data["group"], client_id=data["client_id"], explicit_gray=data["explicit_gray"],
                   clients=tuple(ClientRecord.from_json(c) for c in data["clients"]))


@dataclass(frozen=True)
class TopicPutResult:
    """A created or changed topic (``PUT /v1/topics/{topic}``) and which live brokers serve it with this layout
    (``brokers_pending``: not yet, after the call's wait)."""

    topic: str
    queue_nums: int
    gray_queue_nums: int
    perm: int
    created_at: datetime
    updated_at: datetime
    brokers_ready: tuple[str, ...]
    brokers_pending: tuple[str, ...]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TopicPutResult:
        return cls(topic=data["topic"], queue_nums=int(data["queue_nums"]),
                   gray_queue_nums=int(data["gray_queue_nums"]), perm=int(data["perm"]),
                   created_at=datetime.fromisoformat(data["created_at"]),
                   updated_at=datetime.fromisoformat(data["updated_at"]),
                   brokers_ready=tuple(data["brokers_ready"]), brokers_pending=tuple(data["brokers_pending"]))

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "queue_nums": self.queue_nums, "gray_queue_nums": self.gray_queue_nums,
                "perm": self.perm, "created_at": _text(self.created_at), "updated_at": _text(self.updated_at),
                "brokers_ready": list(self.brokers_ready), "brokers_pending": list(self.brokers_pending)}


@dataclass(frozen=True)
class AuditRecord:
    """One audit entry (``/v1/audit``): who changed which object, when, from which value to which (JSON values,
    whole), and why."""

    id: int
    actor: str
    at: datetime
    object_type: str
    object_id: str
    group: str | None
    action: str
    before: Any
    after: Any
    reason: str | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AuditRecord:
        return cls(id=int(data["id"]), actor=data["actor"], at=datetime.fromisoformat(data["at"]),
                   object_type=data["object_type"], object_id=data["object_id"], group=data.get("group"),
                   action=data["action"], before=data.get("before"), after=data.get("after"),
                   reason=data.get("reason"))

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "actor": self.actor, "at": _text(self.at), "object_type": self.object_type,
                "object_id": self.object_id, "group": self.group, "action": self.action, "before": self.before,
                "after": self.after, "reason": self.reason}


@dataclass(frozen=True)
class ReplicaRecord:
    """One replica of a broker set, as the name server last heard of it."""

    replica_id: int
    address: str
    leader: bool
    in_sync: bool
    live: bool  # a heartbeat within the lease
    log_end_offset: int
    lag_bytes: int  # the leader's last reported log end minus this replica's
    last_heartbeat: datetime

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReplicaRecord:
        return cls(replica_id=int(data["replica_id"]), address=data["address"], leader=bool(data["leader"]),
                   in_sync=bool(data["in_sync"]), live=bool(data["live"]), log_end_offset=int(data["log_end_offset"]),
                   lag_bytes=int(data["lag_bytes"]), last_heartbeat=datetime.fromisoformat(data["last_heartbeat"]))

    def to_json(self) -> dict[str, Any]:
        return {"replica_id": self.replica_id, "address": self.address, "leader": self.leader,
                "in_sync": self.in_sync, "live": self.live, "log_end_offset": self.log_end_offset,
                "lag_bytes": self.lag_bytes, "last_heartbeat": _text(self.last_heartbeat)}


@dataclass(frozen=True)
class ReplicaSetRecord:
    """A replicated broker set: its leader, epoch, in-sync replicas and every replica's lag."""

    broker_name: str
    replication: str  # sync or async
    epoch: int
    leader_replica_id: int
    leader_address: str
    in_sync: tuple[int, ...]
    epoch_start_offset: int
    lease_seconds: float
    leader_lease_expires_at: datetime
    replicas: tuple[ReplicaRecord, ...]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReplicaSetRecord:
        return cls(broker_name=data["broker_name"], replication=data["replication"], epoch=int(data["epoch"]),
                   leader_replica_id=int(data["leader_replica_id"]), leader_address=data["leader_address"],
                   in_sync=tuple(data["in_sync"]), epoch_start_offset=int(data["epoch_start_offset"]),
                   lease_seconds=data["lease_seconds"],
                   leader_lease_expires_at=datetime.fromisoformat(data["leader_lease_expires_at"]),
                   replicas=tuple(ReplicaRecord.from_json(r) for r in data["replicas"]))

    def to_json(self) -> dict[str, Any]:
        return {"broker_name": self.broker_name, "replication": self.replication, "epoch": self.epoch,
                "leader_replica_id": self.leader_replica_id, "leader_address": self.leader_address,
                "in_sync": list(self.in_sync), "epoch_start_offset": self.epoch_start_offset,
                "lease_seconds": self.lease_seconds, "leader_lease_expires_at": _text(self.leader_lease_expires_at),
                "replicas": [r.to_json() for r in self.replicas]}


@dataclass(frozen=True)
class BrokerRecord:
    """A live broker (``/v1/brokers``): where it serves, its lease, its topics, its broker set if it has one."""

    broker_name: str
    address: str
    last_heartbeat: datetime
    lease_expires_at: datetime
    topics: tuple[str, ...]
    replica_set: ReplicaSetRecord | None = None
    grpc_address: str | None = None  # its RocketMQ 5 gRPC endpoint; None: not served

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BrokerRecord:
        replica_set = data.get("replica_set")
        return cls(broker_name=data["broker_name"], address=data["address"],
                   last_heartbeat=datetime.fromisoformat(data["last_heartbeat"]),
                   lease_expires_at=datetime.fromisoformat(data["lease_expires_at"]), topics=tuple(data["topics"]),
                   replica_set=None if replica_set is None else ReplicaSetRecord.from_json(replica_set),
                   grpc_address=data.get("grpc_address"))


@dataclass(frozen=True)
class PrincipalRecord:
    """A principal and its rights (``/v1/principals``); never its token, nor its access key's secret."""

    name: str
    produce: tuple[str, ...]
    consume: tuple[str, ...]
    admin: bool
    broker: bool
    broker_names: tuple[str, ...]
    access_key: str | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PrincipalRecord:
        return cls(name=data["name"], produce=tuple(data["produce"]), consume=tuple(data["consume"]),
                   admin=bool(data["admin"]), broker=bool(data["broker"]),
                   broker_names=tuple(data.get("broker_names") or ()), access_key=data.get("access_key"),
                   created_at=datetime.fromisoformat(data["created_at"]),
                   updated_at=datetime.fromisoformat(data["updated_at"]))

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "produce": list(self.produce), "consume": list(self.consume), "admin": self.admin,
                "broker": self.broker, "broker_names": list(self.broker_names), "access_key": self.access_key,
                "created_at": _text(self.created_at), "updated_at": _text(self.updated_at)}


@dataclass(frozen=True)
class PrincipalToken:
    """A principal's new token (``add``, ``rotate``), shown this once, with its access key and secret key when it
    has them."""

    name: str
    token: str
    access_key: str | None = None
    secret_key: str | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PrincipalToken:
        return cls(name=data["name"], token=data["token"], access_key=data.get("access_key"),
                   secret_key=data.get("secret_key"))
