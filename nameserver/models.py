"""The name server's tables (SQLAlchemy 2 declarative). Alembic creates them; see ``migrations/``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from graymq.nameserver.clock import utc_now
from graymq.nameserver.sqltypes import JsonType, UtcDateTime
from graymq.protocol.membership import CLIENT_STATES, ORPHAN_POLICIES, ROLES
from graymq.protocol.operations import CutoverKind, CutoverMode, CutoverState

# Stable constraint names so Alembic migrations can refer to them on every backend.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

NAME_LENGTH = 255
REPLICATION_MODES = ("sync", "async")
CUTOVER_KINDS = tuple(kind.value for kind in CutoverKind)
CUTOVER_MODES = tuple(mode.value for mode in CutoverMode)  # a rollout's mode: what follows its last step
CUTOVER_STATES = tuple(state.value for state in CutoverState)
RUNNING = CutoverState.RUNNING
DELETION_KINDS = ("topic", "group")


def _one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Broker(Base):
    """A broker known from its heartbeats; live while ``lease_expires_at`` is in the future."""

    __tablename__ = "brokers"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    broker_name: Mapped[str] = mapped_column(String(NAME_LENGTH), unique=True)
    address: Mapped[str] = mapped_column(String(NAME_LENGTH))
    registered_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)
    last_heartbeat: Mapped[datetime] = mapped_column(UtcDateTime)
    lease_expires_at: Mapped[datetime] = mapped_column(UtcDateTime, index=True)
    grpc_address: Mapped[str | None] = mapped_column(String(NAME_LENGTH), default=None)  # RocketMQ 5 endpoint


class BrokerSet(Base):
    """The replicas of one broker name: who leads, under which epoch (the fencing token) and lease, who is in
    sync; see ``services.replica_sets`` for the election rules. A broker started without replicas has none."""

    __tablename__ = "broker_sets"
    __table_args__ = (CheckConstraint(_one_of("replication", REPLICATION_MODES), name="replication"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    broker_name: Mapped[str] = mapped_column(String(NAME_LENGTH), unique=True)
    replication: Mapped[str] = mapped_column(String(8))
    epoch: Mapped[int] = mapped_column(BigInteger)
    leader_replica_id: Mapped[int] = mapped_column(Integer)
    leader_lease_expires_at: Mapped[datetime] = mapped_column(UtcDateTime)
    in_sync: Mapped[list[int]] = mapped_column(JsonType)
    epoch_start_offset: Mapped[int] = mapped_column(BigInteger)  # the leader's log end when elected
    leader_log_end: Mapped[int] = mapped_column(BigInteger)  # as the leader last reported it
    elected_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)


class BrokerReplica(Base):
    """One replica of a broker set, as its latest heartbeat describes it."""

    __tablename__ = "broker_replicas"
    __table_args__ = (UniqueConstraint("broker_name", "replica_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    broker_name: Mapped[str] = mapped_column(String(NAME_LENGTH))
    replica_id: Mapped[int] = mapped_column(Integer)
    address: Mapped[str] = mapped_column(String(NAME_LENGTH))
    log_end_offset: Mapped[int] = mapped_column(BigInteger)
    last_heartbeat: Mapped[datetime] = mapped_column(UtcDateTime)
    lease_expires_at: Mapped[datetime] = mapped_column(UtcDateTime)


class BrokerTopicRoute(Base):
    """One topic as a broker last reported it (its queue layout on that broker)."""

    __tablename__ = "broker_topic_routes"
    __table_args__ = (UniqueConstraint("broker_id", "topic"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    broker_id: Mapped[int] = mapped_column(ForeignKey("brokers.id", ondelete="CASCADE"))
    topic: Mapped[str] = mapped_column(String(NAME_LENGTH), index=True)
    queue_nums: Mapped[int] = mapped_column(Integer)  # the broker's total: base, gray and every lane slot
    gray_queue_nums: Mapped[int] = mapped_column(Integer)
    perm: Mapped[int] = mapped_column(Integer)
    lane_slots: Mapped[int] = mapped_column(Integer, server_default=text("1"))


class Topic(Base):
    """A topic's configured layout, pushed to every broker in heartbeat responses.

    ``queue_nums`` is the base count N an operator gave; ``lane_slots`` (K) reserves room for K lanes of
    ``gray_queue_nums`` queues each, so a broker holds ``N + (K-1)·G`` queues (docs/lanes.md).
    """

    __tablename__ = "topics"
    __table_args__ = (
        CheckConstraint("queue_nums >= 1", name="queue_nums_positive"),
        CheckConstraint(
            "gray_queue_nums >= 0 AND gray_queue_nums <= queue_nums", name="gray_queue_nums_range"
        ),
        CheckConstraint("lane_slots >= 1", name="lane_slots_positive"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(NAME_LENGTH), unique=True)
    queue_nums: Mapped[int] = mapped_column(Integer)
    gray_queue_nums: Mapped[int] = mapped_column(Integer)
    perm: Mapped[int] = mapped_column(Integer)
    lane_slots: Mapped[int] = mapped_column(Integer, server_default=text("1"))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now, onupdate=utc_now)


class Group(Base):
    """A consumer or producer group: its gray switch, the policy for gray queues no gray client serves, and its
    weight (the percent of each topic's normal queues its gray consumers take, see ``protocol.gray``).

    ``fifo`` and ``max_attempts``: how stock (RocketMQ 5) pop consumers of the group consume, as RocketMQ's
    subscription group says it (one message in flight per queue; deliveries before the dead-letter queue).

    ``gray_retired``: the gray side was rolled back by a rollout: its consumers hold and consume nothing (state
    ``RETIRED``) and the normal consumers adopt the gray queues, until a new rollout or an operator clears it.
    """

    __tablename__ = "groups"
    __table_args__ = (
        CheckConstraint(_one_of("orphan_policy", ORPHAN_POLICIES), name="orphan_policy"),
        CheckConstraint("gray_weight >= 0 AND gray_weight <= 100", name="gray_weight_range"),
        CheckConstraint("max_attempts >= 1 AND max_attempts <= 1000", name="max_attempts_range"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(NAME_LENGTH), unique=True)
    gray_switch: Mapped[bool] = mapped_column(Boolean)
    orphan_policy: Mapped[str] = mapped_column(String(16), default="hold")
    gray_weight: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    gray_retired: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    fifo: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))  # stock pop consumers: in order
    max_attempts: Mapped[int] = mapped_column(Integer, server_default=text("16"))  # deliveries before the DLQ
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now, onupdate=utc_now)


class Client(Base):
    """One client (consumer, producer or Spark job) of a group, as its heartbeats describe it.

    ``explicit_gray`` is what operators set (``None``: follow the group's rules);
    ``declared_gray`` is the flag the client was started with (``None``: none), used when neither
    an explicit value nor a rule applies; ``gray`` and ``state`` are what the client reports it
    is doing — the name server never changes them. ``principal`` is who registered the client
    (``None``: nobody yet, or dev mode); see ``repositories.clients.ClientBinding`` for the rule.

    Lanes: ``explicit_lane``, ``declared_lane`` and ``lane`` name the lane of a true ``explicit_gray``,
    ``declared_gray`` and ``gray``; ``NULL`` with a true flag is the lane ``gray``, so rows from before lanes keep
    their meaning.
    """

    __tablename__ = "clients"
    __table_args__ = (
        UniqueConstraint("group_id", "client_id", "role"),
        CheckConstraint(_one_of("role", ROLES), name="role"),
        CheckConstraint(_one_of("state", CLIENT_STATES), name="state"),
        Index("ix_clients_group_id_last_seen", "group_id", "last_seen"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    group_id: Mapped[int] = mapped_column(ForeignKey("groups.id", ondelete="CASCADE"))
    client_id: Mapped[str] = mapped_column(String(NAME_LENGTH))
    role: Mapped[str] = mapped_column(String(16))
    labels: Mapped[dict[str, str]] = mapped_column(JsonType)
    explicit_gray: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    declared_gray: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    gray: Mapped[bool] = mapped_column(Boolean)
    state: Mapped[str] = mapped_column(String(16))
    queues: Mapped[list[str]] = mapped_column(JsonType)
    topics: Mapped[list[str]] = mapped_column(JsonType)
    first_seen: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)
    last_seen: Mapped[datetime] = mapped_column(UtcDateTime)
    principal: Mapped[str | None] = mapped_column(String(NAME_LENGTH), nullable=True)
    health: Mapped[dict[str, Any] | None] = mapped_column(JsonType, nullable=True)  # the latest reported, per side
    gray_marks: Mapped[bool | None] = mapped_column(Boolean, nullable=True)  # producers: honours messages' marks
    explicit_lane: Mapped[str | None] = mapped_column(String(NAME_LENGTH), nullable=True)
    declared_lane: Mapped[str | None] = mapped_column(String(NAME_LENGTH), nullable=True)
    lane: Mapped[str | None] = mapped_column(String(NAME_LENGTH), nullable=True)  # as reported
    frozen_lanes: Mapped[list[str] | None] = mapped_column(JsonType, nullable=True)  # producers: marks not honoured


class GrayRule(Base):
    """A label selector giving matching clients their grayFlag; the lowest ``position`` that matches wins.

    ``lane`` names the lane of a true ``gray`` (``NULL``: the lane ``gray``). A rule without a group
    (``group_id`` ``NULL``) applies to every group, after the group's own rules (docs/lanes.md).
    """

    __tablename__ = "gray_rules"
    __table_args__ = (Index("ix_gray_rules_group_id_position", "group_id", "position"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    group_id: Mapped[int | None] = mapped_column(ForeignKey("groups.id", ondelete="CASCADE"), nullable=True)
    selector: Mapped[dict[str, str]] = mapped_column(JsonType)
    gray: Mapped[bool] = mapped_column(Boolean)
    position: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)
    lane: Mapped[str | None] = mapped_column(String(NAME_LENGTH), nullable=True)


class LaneSlot(Base):
    """A lane holding one of a topic's ``lane_slots`` (taken by its first client; given back when it ends)."""

    __tablename__ = "lane_slots"
    __table_args__ = (UniqueConstraint("topic_id", "slot"), UniqueConstraint("topic_id", "lane"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    topic_id: Mapped[int] = mapped_column(ForeignKey("topics.id", ondelete="CASCADE"))
    slot: Mapped[int] = mapped_column(Integer)
    lane: Mapped[str] = mapped_column(String(NAME_LENGTH))
    taken_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)
    taken_by: Mapped[str] = mapped_column(String(NAME_LENGTH))


class GroupLane(Base):
    """A group's record of one lane: its orphan policy override (``NULL``: the default), since when it takes
    part in the lane through a client of its own (``joined_at``; ``NULL``: not through a client) and its weight
    (percent of each topic's base queues the lane's consumers take; the ``gray`` lane's is ``Group.gray_weight``)."""

    __tablename__ = "group_lanes"
    __table_args__ = (
        UniqueConstraint("group_id", "lane"),
        CheckConstraint(_one_of("orphan_policy", ORPHAN_POLICIES), name="orphan_policy"),
        CheckConstraint("weight >= 0 AND weight <= 100", name="weight_range"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    group_id: Mapped[int] = mapped_column(ForeignKey("groups.id", ondelete="CASCADE"))
    lane: Mapped[str] = mapped_column(String(NAME_LENGTH))
    orphan_policy: Mapped[str | None] = mapped_column(String(16), nullable=True)
    joined_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    weight: Mapped[int] = mapped_column(Integer, server_default=text("0"))


class CutoverOperation(Base):
    """A promote, rollback or rollout of a group, recorded by its runbook step by step (kind, mode and state hold the
    values of ``protocol.operations``' enums; the name server checks each state change against its transitions).

    At most one operation per group and lane is ``RUNNING`` (a partial unique index enforces it): lanes are promoted
    and rolled back on their own (``lane``: the lane it ends; ``gray`` for today's gray side and every rollout).
    """

    __tablename__ = "cutover_operations"
    __table_args__ = (
        CheckConstraint(_one_of("kind", CUTOVER_KINDS), name="kind"),
        CheckConstraint(_one_of("mode", CUTOVER_MODES), name="mode"),
        CheckConstraint(_one_of("state", CUTOVER_STATES), name="state"),
        Index(
            "uq_cutover_operations_one_running",
            "group_id",
            "lane",
            unique=True,
            postgresql_where=text("state = 'RUNNING'"),
            sqlite_where=text("state = 'RUNNING'"),
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    group_id: Mapped[int] = mapped_column(ForeignKey("groups.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(16))
    mode: Mapped[str] = mapped_column(String(16))
    lane: Mapped[str] = mapped_column(String(NAME_LENGTH), server_default=text("'gray'"))
    producer_groups: Mapped[list[str]] = mapped_column(JsonType)
    state: Mapped[str] = mapped_column(String(16))
    step: Mapped[str | None] = mapped_column(Text, nullable=True)
    result: Mapped[dict[str, Any] | None] = mapped_column(JsonType, nullable=True)
    started_by: Mapped[str] = mapped_column(String(NAME_LENGTH))
    started_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now, onupdate=utc_now)
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)

    group: Mapped[Group] = relationship()


class Deletion(Base):
    """A topic or group an operator deleted, numbered in order.

    Brokers learn deletions through their registration: each reports the last id it applied and
    gets the newer ones (a topic: drop its config and offsets; a group: drop its offsets).
    """

    __tablename__ = "deletions"
    __table_args__ = (CheckConstraint(_one_of("kind", DELETION_KINDS), name="kind"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(NAME_LENGTH))
    deleted_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)


class AuditEntry(Base):
    """Who changed what, when, from which value to which, and why. Never updated or deleted."""

    __tablename__ = "audit_log"
    __table_args__ = (
        Index("ix_audit_log_group_name_id", "group_name", "id"),
        Index("ix_audit_log_object_type_object_id", "object_type", "object_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    actor: Mapped[str] = mapped_column(String(NAME_LENGTH))
    at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)
    object_type: Mapped[str] = mapped_column(String(32))
    object_id: Mapped[str] = mapped_column(String(NAME_LENGTH))
    group_name: Mapped[str | None] = mapped_column(String(NAME_LENGTH), nullable=True)
    action: Mapped[str] = mapped_column(String(32))
    before: Mapped[Any] = mapped_column(JsonType, nullable=True)
    after: Mapped[Any] = mapped_column(JsonType, nullable=True)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)


class Principal(Base):
    """A caller of the name server (and, through it, of brokers): a token, kept as its SHA-256 only, and rights.

    ``produce`` holds topic patterns; ``consume`` holds ``GROUP_PATTERN[:TOPIC_PATTERN]`` entries, ``broker_names``
    the brokers a broker principal may register as (``NAME_PATTERN[:REPLICA_ID_PATTERN]``; see ``acl``).
    """

    __tablename__ = "principals"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(NAME_LENGTH), unique=True)
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    produce: Mapped[list[str]] = mapped_column(JsonType)
    consume: Mapped[list[str]] = mapped_column(JsonType)
    admin: Mapped[bool] = mapped_column(Boolean)
    broker: Mapped[bool] = mapped_column(Boolean)
    broker_names: Mapped[list[str]] = mapped_column(JsonType, default=list)  # NAME_PATTERN[:REPLICA_ID_PATTERN]
    # Stock RocketMQ 5 clients sign with an access key and secret (HMAC-SHA1); a signature can only be checked with
    # the secret itself, so it is kept (the token, as before, only as its digest). None: no access key issued.
    access_key: Mapped[str | None] = mapped_column(String(64), index=True, unique=True, default=None)
    secret_key: Mapped[str | None] = mapped_column(String(128), default=None)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now, onupdate=utc_now)
