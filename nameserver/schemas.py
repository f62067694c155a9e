"""Request and response bodies of the REST API (``/v1``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal, Self

from fastapi import Path
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StringConstraints,
    WithJsonSchema,
    model_serializer,
    model_validator,
)

from graymq.core.queue_layout import gray_queue_ids
from graymq.protocol.acl import PATTERN_RULE, check_broker_right, check_consume_right, check_pattern
from graymq.protocol.health import MAX_LANES
from graymq.protocol.membership import ClientStateName, OrphanPolicy, Role
from graymq.protocol.names import (
    CLIENT_ID_RULE,
    LABEL_KEY_RULE,
    LABEL_VALUE_RULE,
    NAME_RULE,
    check_broker_name,
    check_client_id,
    check_group_name,
    check_label_key,
    check_label_value,
    check_lane_name,
    check_principal_name,
    check_topic_name,
)
from graymq.protocol.operations import MODES_OF_KIND, CutoverKind, CutoverMode, CutoverState

ID_MAX = 2**31 - 1  # ids are INTEGER columns (32-bit on PostgreSQL)


def _rule(check: Callable[[str], str | None]) -> AfterValidator:
    """A pydantic validator refusing what ``check`` (a rule of ``protocol.names``) refuses, with its message."""

    def validate(value: str) -> str:
        problem = check(value)
        if problem:
            raise ValueError(problem)
        return value

    return AfterValidator(validate)


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("the NUL character is not allowed")
    return value


def _storable_json(value: Any) -> Any:
    """JSON both databases store: no NUL character (PostgreSQL's text refuses it), no NaN or infinity (not JSON)."""
    try:
        text = json.dumps(value, allow_nan=False)
    except ValueError:
        raise ValueError("NaN and infinite numbers are not allowed (JSON has none)") from None
    if "\\u0000" in text:
        raise ValueError("the NUL character is not allowed")
    return value


def _documented(pattern: str, rule: str) -> WithJsonSchema:
    """The rule as the OpenAPI shows it (validation itself is the ``check_*`` function, with its message)."""
    return WithJsonSchema({"type": "string", "pattern": pattern, "description": rule})


_NAME_SCHEMA = _documented(r"^[A-Za-z0-9%|_-]{1,127}$", NAME_RULE)
_CLIENT_ID_SCHEMA = _documented(r"^[!-.0-~]{1,255}$", CLIENT_ID_RULE)

# Every name, in bodies and URL paths alike, follows the one rule of protocol/names.py.
TopicName = Annotated[str, _rule(check_topic_name), _NAME_SCHEMA]
GroupName = Annotated[str, _rule(check_group_name), _NAME_SCHEMA]
ClientId = Annotated[str, _rule(check_client_id), _CLIENT_ID_SCHEMA]
BrokerName = Annotated[str, _rule(check_broker_name), _NAME_SCHEMA]
ReplicationMode = Literal["sync", "async"]
MAX_REPLICA_ID = 63
ReplicaId = Annotated[int, Field(strict=True, ge=0, le=MAX_REPLICA_ID)]
BrokerAddress = Annotated[
    str, StringConstraints(min_length=1, max_length=255, pattern=r"^[!-.0-~]+$"),
    Field(description="host:port clients dial (printable ASCII, no space or '/')"),
]
PrincipalName = Annotated[str, _rule(check_principal_name), _NAME_SCHEMA]
LaneName = Annotated[str, _rule(check_lane_name), _NAME_SCHEMA]
LanePath = Annotated[str, Path(), _rule(check_lane_name), _NAME_SCHEMA]
LabelKey = Annotated[str, _rule(check_label_key), _documented(r"^[A-Za-z0-9._/-]{1,63}$", LABEL_KEY_RULE)]
LabelValue = Annotated[str, _rule(check_label_value), _documented(r"^[ -~]{0,255}$", LABEL_VALUE_RULE)]
TopicPath = Annotated[str, Path(), _rule(check_topic_name), _NAME_SCHEMA]
GroupPath = Annotated[str, Path(), _rule(check_group_name), _NAME_SCHEMA]
ClientIdPath = Annotated[str, Path(), _rule(check_client_id), _CLIENT_ID_SCHEMA]
PrincipalPath = Annotated[str, Path(), _rule(check_principal_name), _NAME_SCHEMA]
IdPath = Annotated[int, Path(ge=1, le=ID_MAX)]
# Free text stored as is (PostgreSQL cannot store NUL).
Text = Annotated[str, AfterValidator(_no_nul)]
Reason = Annotated[Text | None, Field(default=None, max_length=2000)]
Labels = dict[LabelKey, LabelValue]
GrayWeight = Annotated[int, Field(strict=True, ge=0, le=100)]  # percent of a topic's normal queues
MaxAttempts = Annotated[int, Field(strict=True, ge=1, le=1000)]  # deliveries of a message before the DLQ

# RocketMQ permission bits: READ 4, WRITE 2, INHERIT 1.
DEFAULT_PERM = 6
# Bounds on what one heartbeat may carry (a report is stored whole on every beat).
MAX_LABELS = 64
MAX_TOPICS = 10_000
MAX_CLIENT_TOPICS = 1_000
MAX_QUEUES = 100_000
MAX_WATCH_S = 60.0
CLIENTS_PAGE_MAX = 1000  # clients in one page of GET /v1/groups/{group}/clients
MAX_HEARTBEAT_BATCH = 500  # client heartbeats in one POST /v1/clients/heartbeats
MAX_ROUTES = 500  # topics in one POST /v1/topic-routes
MAX_ALIVE_IDS = 5000  # alive ids in one POST /v1/clients/heartbeats (an int each: a whole process's clients)
MAX_BROKER_QUEUES = 1024  # queues of one topic on one broker, lane slots included
GRAY_LANE = "gray"  # the lane a true flag naming none is in (docs/lanes.md)


class QueueLayout(BaseModel):
    """How many queues a topic has per broker, how many of them are gray, its permissions and its lane slots
    (each of ``gray_queue_nums`` queues; slot 0 is the gray queues, see docs/lanes.md)."""

    queue_nums: int = Field(ge=1, le=MAX_BROKER_QUEUES)
    gray_queue_nums: int = Field(default=0, ge=0)
    perm: int = Field(default=DEFAULT_PERM, ge=0, le=7)
    lane_slots: int = Field(default=1, ge=1, le=MAX_BROKER_QUEUES, description="lanes the topic has room for "
                            "(shown when more than 1: a topic without lanes reads as before)")

    @model_serializer(mode="wrap")
    def _one_slot_unsaid(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if self.lane_slots == 1:
            data.pop("lane_slots", None)
        return data

    @model_validator(mode="after")
    def _gray_within_queues(self) -> Self:
        gray_queue_ids(self.queue_nums, self.gray_queue_nums)  # raises ValueError when out of range
        return self


class TopicConfig(QueueLayout):
    topic: TopicName


class TopicPut(QueueLayout):
    """``queue_nums`` is the base count N: a broker holds ``N + (lane_slots-1)·gray_queue_nums`` queues."""

    reason: Reason

    @model_validator(mode="after")
    def _slots_fit(self) -> Self:
        if self.lane_slots > 1 and not self.gray_queue_nums:
            raise ValueError(f"lane_slots {self.lane_slots} needs gray_queue_nums >= 1 (a slot is that many queues)")
        total = self.queue_nums + (self.lane_slots - 1) * self.gray_queue_nums
        if total > MAX_BROKER_QUEUES:
            raise ValueError(f"{self.queue_nums} queues and {self.lane_slots} lane slots of {self.gray_queue_nums} "
                             f"make {total} queues per broker, more than {MAX_BROKER_QUEUES}")
        return self


class TopicView(TopicConfig):
    created_at: datetime
    updated_at: datetime


class TopicPutResult(TopicView):
    """A created or changed topic and which live brokers already serve it with this layout."""

    brokers_ready: list[str]
    brokers_pending: list[str] = Field(
        description="live brokers that have not reported the topic with this layout yet (after ``wait_s``)"
    )


class BrokerHeartbeat(BaseModel):
    broker_name: BrokerName
    address: BrokerAddress
    replica_id: ReplicaId | None = Field(
        default=None, description="a replica of a broker set: only its leader's registration sets the route")
    topics: list[TopicConfig] = Field(default_factory=list, max_length=MAX_TOPICS)
    deletions_applied: int = Field(
        default=0, ge=0, le=ID_MAX, description="id of the last deletion the broker applied"
    )
    register_interval_s: float | None = Field(
        default=None, gt=0, le=3600, description="how often the broker registers: its lease is a few such intervals")
    grpc_address: BrokerAddress | None = Field(
        default=None, description="host:port of the broker's RocketMQ 5 gRPC endpoint (stock SDKs); None: not served")

    @model_validator(mode="after")
    def _topics_once(self) -> Self:
        names = [t.topic for t in self.topics]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"topics listed more than once: {', '.join(repeated)}")
        return self


class BrokerUnregister(BaseModel):
    """A broker stopping cleanly: it leaves the routes at once (a set's replica: see ``RegistryService.unregister``)."""

    broker_name: BrokerName
    address: BrokerAddress
    replica_id: ReplicaId | None = None


class BrokerUnregisterResponse(BaseModel):
    unrouted: bool = Field(description="whether the broker's route was withdrawn (not when another process now "
                           "registers under its name, nor for a set's replica with a live in-sync successor)")


class DeletionView(BaseModel):
    id: int
    kind: Literal["topic", "group"]
    name: str


class BrokerTopicConfig(TopicConfig):
    """A topic as brokers get it: ``queue_nums`` the total, and which lane holds which slot (shown when one does)."""

    lanes: dict[str, int] = Field(default_factory=dict, description="lane -> the slot it holds on the topic")

    @model_serializer(mode="wrap")
    def _defaults_unsaid(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if not self.lanes:
            data.pop("lanes", None)
        if self.lane_slots == 1:
            data.pop("lane_slots", None)
        return data


class BrokerHeartbeatResponse(BaseModel):
    lease_seconds: int
    topics: list[BrokerTopicConfig]
    topics_version: str = Field(description="changes whenever the topic table or the deletion log does")
    deletions: list[DeletionView] = Field(
        default_factory=list, description="deletions newer than the broker's ``deletions_applied``, oldest first"
    )
    last_deletion_id: int = 0


class BrokerWatch(BaseModel):
    broker_name: BrokerName
    topics_version: Annotated[str, StringConstraints(max_length=128)] | None = Field(
        default=None, description="what the broker knows; None: answer at once"
    )
    timeout_s: float = Field(default=20.0, ge=0, le=MAX_WATCH_S, description="answer after this long at the latest")


class BrokerWatchResponse(BaseModel):
    topics_version: str


class ReplicaHeartbeat(BaseModel):
    """A replica of a broker set reporting itself (every quarter lease); the leader also proposes the in-sync set."""

    broker_name: BrokerName
    replica_id: ReplicaId
    address: BrokerAddress
    replication: ReplicationMode
    epoch: int = Field(ge=0, le=ID_MAX, description="the epoch the replica knows (0: none yet, just started)")
    log_end_offset: int = Field(ge=0, le=2**62, description="where its commit log ends")
    in_sync: list[ReplicaId] | None = Field(
        default=None, max_length=MAX_REPLICA_ID + 1,
        description="the leader's proposal of the in-sync replicas (compare-and-set on epoch); None: no change")


class ReplicaView(BaseModel):
    replica_id: int
    address: str
    leader: bool
    in_sync: bool
    live: bool = Field(description="heartbeat within the lease")
    log_end_offset: int
    lag_bytes: int = Field(description="the leader's last reported log end minus this replica's")
    last_heartbeat: datetime


class ReplicaSetView(BaseModel):
    broker_name: str
    replication: ReplicationMode
    epoch: int
    leader_replica_id: int
    leader_address: str
    in_sync: list[int]
    epoch_start_offset: int = Field(description="the leader's log end when elected: replicas truncate past it")
    lease_seconds: float
    leader_lease_expires_at: datetime
    replicas: list[ReplicaView]


class BrokerView(BaseModel):
    broker_name: str
    address: str
    last_heartbeat: datetime
    lease_expires_at: datetime
    topics: list[str]
    replica_set: ReplicaSetView | None = None
    grpc_address: str | None = None


class BrokerRoute(BaseModel):
    broker_name: str
    address: str = Field(description="where clients send and pull: the leader of a broker set")
    queue_nums: int = Field(description="the broker's total: base, gray and every lane slot's queues")
    gray_queue_nums: int
    perm: int
    lane_slots: int = Field(default=1, description="the topic's lane slots on this broker (docs/lanes.md)")
    replicas: list[ReplicaView] = Field(default_factory=list, description="a broker set's replicas; empty: one copy")
    grpc_address: str | None = Field(
        default=None, description="where stock RocketMQ 5 clients reach the broker (gRPC); None: not served")


class RefusedRegistration(BaseModel):
    """A broker's registration the name server refused (its token does not cover the name), while it keeps trying."""

    broker_name: str
    replica_id: int | None = None
    reason: str = Field(description="the refusal in one line: principal, broker name, the names it may use, the fix")
    refused_at: datetime


class TopicRoute(BaseModel):
    topic: str
    queue_nums: int
    gray_queue_nums: int
    brokers: list[BrokerRoute]
    lanes: dict[str, int] = Field(default_factory=dict, description="lane -> the slot it holds on the topic")
    refused_registrations: list[RefusedRegistration] = Field(
        default_factory=list, description="brokers this name server refused to register lately: not in any route")


class TopicRoutesQuery(BaseModel):
    """Several topics' routes in one request (a process's clients refreshing every topic they use)."""

    topics: list[TopicName] = Field(min_length=1, max_length=MAX_ROUTES)


class TopicRouteResult(BaseModel):
    """One topic's ``route``, or the error it alone got (``status_code``, ``error``, ``detail``), as
    ``GET /v1/topics/{topic}/route`` would answer it."""

    status_code: int = 200
    route: TopicRoute | None = None
    error: str | None = None
    detail: Any = None


class TopicRoutesResponse(BaseModel):
    results: list[TopicRouteResult] = Field(description="one a topic asked for, in the request's order")


Count = Annotated[int, Field(strict=True, ge=0, le=2**62)]
Millis = Annotated[float, Field(ge=0, le=1e9, allow_inf_nan=False)]


class SideHealth(BaseModel):
    """How one side's listener did: counters since the client started, latency over its recent window."""

    model_config = ConfigDict(extra="forbid")

    consumed: Count = 0
    failed: Count = 0
    sent_back: Count = 0
    dead_lettered: Count = 0
    p50_ms: Millis = 0.0
    p99_ms: Millis = 0.0


class ConsumeHealth(BaseModel):
    """A consumer's health per side: ``gray`` while it consumed as gray (v2), ``normal`` while normal; ``lanes``
    splits the gray side by the lane it consumed in (left out of what is stored when empty)."""

    model_config = ConfigDict(extra="forbid")

    gray: SideHealth = Field(default_factory=SideHealth)
    normal: SideHealth = Field(default_factory=SideHealth)
    lanes: dict[LaneName, SideHealth] = Field(default_factory=dict, max_length=MAX_LANES,
                                              exclude_if=lambda lanes: not lanes,
                                              description="the gray side per lane consumed in")


class ClientHeartbeat(BaseModel):
    group: GroupName
    client_id: ClientId
    role: Role
    labels: Labels = Field(default_factory=dict, max_length=MAX_LABELS)
    declared_gray: bool | None = Field(
        default=None, description="the flag the client was started with; used when no explicit flag or rule applies"
    )
    gray: bool = False
    state: ClientStateName = "NORMAL"
    topics: list[TopicName] = Field(default_factory=list, max_length=MAX_CLIENT_TOPICS)
    queues: list[Annotated[Text, StringConstraints(max_length=512)]] = Field(
        default_factory=list, max_length=MAX_QUEUES
    )
    health: ConsumeHealth | None = Field(default=None, description="consumers: how their listener does, per side")
    gray_marks: bool | None = Field(
        default=None, description="producers: whether they honour messages' gray marks (as last applied); None: "
        "not reported"
    )
    lane: LaneName | None = Field(default=None, description="the lane the client is in (with gray: true); None: gray")
    declared_lane: LaneName | None = Field(default=None, description="the lane the client was started in")
    frozen_lanes: list[LaneName] | None = Field(
        default=None, max_length=MAX_CLIENT_TOPICS, description="producers: the lanes whose marks they do not "
        "honour now (a promote or rollback of the lane covers them), as last applied; None: not reported")

    @model_validator(mode="after")
    def _lanes_with_flags(self) -> Self:
        """A lane needs its flag (``gray``, ``declared_gray``: a declared lane alone sets it); ``gray`` is stored as
        no lane, as rows from before lanes are."""
        if self.lane is not None and not self.gray:
            raise ValueError(f"lane {self.lane} is reported with gray false: a client in a lane reports gray true")
        if self.declared_lane is not None and self.declared_gray is False:
            raise ValueError(f"declared_lane {self.declared_lane} with declared_gray false")
        if self.declared_lane is not None:
            self.declared_gray = True
        self.lane = None if self.lane == GRAY_LANE else self.lane
        self.declared_lane = None if self.declared_lane == GRAY_LANE else self.declared_lane
        return self


class QueueCounts(BaseModel):
    """A topic's layout for a client: ``queue_nums`` is the broker's total (lane slots included); ``lanes`` and
    ``lane_slots`` appear only when the topic has lanes (so a client without lanes reads today's answer)."""

    queue_nums: int
    gray_queue_nums: int
    lane_slots: int = 1
    lanes: dict[str, int] = Field(default_factory=dict, description="lane -> the slot it holds on the topic")

    @model_serializer(mode="wrap")
    def _without_defaults(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if self.lane_slots == 1 and not self.lanes:
            data.pop("lane_slots", None)
            data.pop("lanes", None)
        return data


def _without_zero_weight(data: dict[str, Any]) -> dict[str, Any]:
    """A lane's JSON without ``weight`` when it is 0: a group without weights per lane answers as before them."""
    if not data.get("weight"):
        data.pop("weight", None)
    return data


class LaneState(BaseModel):
    """How a group treats one lane's queues when none of its consumers is in that lane."""

    orphan_policy: OrphanPolicy
    taking_part: bool = Field(description="a rule or flag of the group names the lane, or one of its clients has "
                              "been in it since it began (an all-groups rule alone does not count)")
    weight: int = Field(default=0, description="percent of each topic's base queues the lane's consumers take "
                        "(docs/lanes.md; the gray lane's is the group's gray_weight); shown when above 0")

    @model_serializer(mode="wrap")
    def _no_weight_unsaid(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_zero_weight(handler(self))


class ClientHeartbeatResponse(BaseModel):
    group: str
    client_id: str
    role: Role
    gray_switch: bool
    desired_gray: bool
    explicit_gray: bool | None
    gray: bool
    state: ClientStateName
    orphan_policy: OrphanPolicy
    gray_weight: int = Field(description="percent of each topic's normal queues the group's gray consumers take")
    gray_retired: bool = Field(default=False, description="the group's gray side is rolled back: gray consumers "
                               "hold nothing (RETIRED), normal consumers adopt the gray queues")
    gray_marks: bool = Field(default=True, description="producers: honour messages' gray marks (explicit or "
                             "propagated); false while the switch is off, a promote/rollback covering the producer "
                             "group runs, the client has an explicit normal flag, or its principal has no right "
                             "naming the group")
    lane_marks: bool = Field(default=True, description="producers: honour messages' lane marks but those of "
                             "frozen_lanes; false while the switch is off, the client has an explicit normal flag, or "
                             "its principal has no right naming the group")
    frozen_lanes: list[str] = Field(default_factory=list, description="producers: the lanes a RUNNING promote or "
                                    "rollback covering the producer group freezes: their marks are not honoured")
    fifo: bool = Field(default=False, description="stock pop consumers: one message in flight per queue, in order")
    max_attempts: int = Field(default=16, description="stock pop consumers: deliveries before the dead-letter queue")
    topics: dict[str, QueueCounts]
    desired_lane: str | None = Field(default=None, description="the lane the client should be in (None: base; "
                                     "gray: today's gray side)")
    lanes: dict[str, LaneState] = Field(default_factory=dict, description="the lanes the group may meet (held on a "
                                        "topic, or named by the group), each as the group treats it")


class ClientAlive(BaseModel):
    """A client whose report is unchanged since its last full heartbeat the name server answered: it is alive.
    Only ``last_seen`` is refreshed (and ``health``, when given); nothing is answered but a status."""

    model_config = ConfigDict(extra="forbid")

    group: GroupName
    client_id: ClientId
    role: Role
    health: ConsumeHealth | None = Field(default=None, description="consumers: their health now, when it changed "
                                         "since the full heartbeat (stored as a full heartbeat's is); None: as is")


class ClientHeartbeats(BaseModel):
    """Several clients' heartbeats in one call (a broker heartbeating the stock clients it registered with one
    credential), each checked and stored as ``POST /v1/clients/heartbeat`` would; ``alive``, the keys of clients
    whose reports did not change, whose ``last_seen`` alone is refreshed (and ``health`` stored); ``alive_ids``, the
    same for clients by the ``alive_id`` their last full heartbeat's result gave. Never all empty."""

    heartbeats: list[ClientHeartbeat] = Field(default_factory=list, max_length=MAX_HEARTBEAT_BATCH)
    alive: list[ClientAlive] = Field(default_factory=list, max_length=MAX_HEARTBEAT_BATCH)
    alive_ids: list[Annotated[int, Field(ge=1, le=ID_MAX)]] = Field(
        default_factory=list, max_length=MAX_ALIVE_IDS, description="clients whose report did not change, by the "
        "alive_id of their last full heartbeat's result: their last_seen alone is refreshed")

    @model_validator(mode="after")
    def _not_empty(self) -> Self:
        if not self.heartbeats and not self.alive and not self.alive_ids:
            raise ValueError("a batch holds at least one heartbeat or alive client")
        return self


class ClientHeartbeatResult(BaseModel):
    """One heartbeat of a batch: its ``answer``, or the error it alone got (``status_code``, ``error``, ``detail``).
    A heartbeat stored gives its ``alive_id``: the client's later beats while its report stays the same may name
    it alone, under the request's ``alive_ids``."""

    status_code: int = 200
    answer: ClientHeartbeatResponse | None = None
    error: str | None = None
    detail: Any = None
    alive_id: int | None = Field(default=None, exclude_if=lambda alive_id: alive_id is None,
                                 description="batched heartbeats: the id to beat alive with (left out otherwise)")


class ClientAliveResult(BaseModel):
    """One alive client of a batch: 200 (its ``last_seen`` refreshed), or 404 (unknown, not live, another
    principal's: send the full heartbeat) or 403 (beyond the rights) with ``error`` and ``detail``."""

    status_code: int = 200
    error: str | None = None
    detail: Any = None

    @model_serializer(mode="wrap")
    def _status_alone_when_refreshed(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {"status_code": self.status_code} if self.status_code < 300 else data


class ClientHeartbeatsResponse(BaseModel):
    results: list[ClientHeartbeatResult] = Field(description="one per heartbeat, in the request's order")
    alive: list[ClientAliveResult] = Field(default_factory=list, exclude_if=lambda alive: not alive,
                                           description="heartbeats: one per alive client, in the request's order "
                                           "(left out when it listed none)")
    alive_missing: list[int] | None = Field(
        default=None, exclude_if=lambda missing: missing is None, description="heartbeats: the alive_ids not "
        "refreshed (unknown, not live, another principal's: send their full heartbeats); left out when the request "
        "had none")


class ClientWatchesResponse(ClientHeartbeatsResponse):
    versions: dict[str, str] | None = Field(
        default=None, exclude_if=lambda versions: versions is None,
        description="a watch with `since`: each watched group's version when its views were read (send them back "
        "as the next poll's `since`); left out otherwise")


class WatchedState(BaseModel):
    """The part of a heartbeat answer a client acts on; a watch returns once it differs."""

    desired_gray: bool
    gray_switch: bool
    orphan_policy: OrphanPolicy
    gray_weight: GrayWeight | None = Field(
        default=None, description="the group's weight as the client knows it; None: not compared"
    )
    gray_retired: bool | None = Field(default=None, description="as the client knows it; None: not compared")
    gray_marks: bool | None = Field(default=None, description="as the client knows it; None: not compared")
    lane_marks: bool | None = Field(default=None, description="as the client knows it; None: not compared")
    frozen_lanes: list[str] | None = Field(default=None, description="as the client knows it; None: not compared")
    desired_lane: str | None = Field(default=None, description="as the client knows it; absent: not compared")
    lanes: dict[str, LaneState] | None = Field(default=None, description="as the client knows it; None: not compared")


class ClientWatch(BaseModel):
    group: GroupName
    client_id: ClientId
    role: Role
    known: WatchedState | None = Field(default=None, description="what the client knows; None: answer at once")
    timeout_s: float = Field(default=20.0, ge=0, le=MAX_WATCH_S, description="answer after this long at the latest")


class ClientWatches(BaseModel):
    """Several clients' watches in one long poll (a broker watching for the stock clients it registered with one
    credential): answered once one of them differs from what it knows, or after ``timeout_s``."""

    watches: list[ClientWatch] = Field(min_length=1, max_length=MAX_HEARTBEAT_BATCH)
    timeout_s: float = Field(default=20.0, ge=0, le=MAX_WATCH_S, description="answer after this long at the latest")
    since: dict[GroupName, Annotated[str, StringConstraints(max_length=64)]] | None = Field(
        default=None, max_length=MAX_HEARTBEAT_BATCH,
        description="the `versions` of this poll's last answer, sent when every watch's `known` is what that answer "
        "said: while each watched group's version is current, the name server reads nothing before it waits. With "
        "`since` (even empty), a watch whose view does not differ from its `known` is answered `status_code` 304 "
        "alone")


class ClientView(BaseModel):
    client_id: str
    role: Role
    labels: dict[str, str]
    explicit_gray: bool | None
    declared_gray: bool | None = None
    desired_gray: bool
    gray: bool
    state: ClientStateName
    queues: list[str]
    topics: list[str]
    last_seen: datetime
    health: ConsumeHealth | None = None
    gray_marks: bool | None = Field(default=None, description="producers: honour messages' gray marks, as reported")
    frozen_lanes: list[str] | None = Field(default=None, description="producers: the lanes whose marks they do not "
                                           "honour now, as reported (None: not reported)")
    principal: str | None = Field(default=None, description="who registered the client (None: dev mode)")
    explicit_lane: str | None = Field(default=None, description="the lane its explicit flag names (None: base "
                                      "or no flag)")
    declared_lane: str | None = Field(default=None, description="the lane it was started in (None: none)")
    desired_lane: str | None = Field(default=None, description="the lane it should be in (None: base)")
    lane: str | None = Field(default=None, description="the lane it reports being in (None: base)")
    stale: bool = Field(
        default=False,
        description="no heartbeat for GRAYMQ_CLIENT_STALE_SECONDS: presumed gone (killed, partitioned) until it "
        "reports again or expires",
    )


class ClientCount(BaseModel):
    """How many live clients of one role are on one side (what they report), over the whole group."""

    role: Role
    lane: str | None = Field(description="the lane they report being in (gray: the gray side; None: base)")
    clients: int
    stale: int = Field(description="of them, silent for GRAYMQ_CLIENT_STALE_SECONDS")


class GroupClients(BaseModel):
    """The group's settings and its live clients: every one, or the page ``offset``/``limit`` asked for; ``total``
    and ``counts`` always cover them all."""

    group: str
    gray_switch: bool
    orphan_policy: OrphanPolicy
    gray_weight: int
    gray_retired: bool = False
    clients: list[ClientView]
    total: int = Field(description="live clients (of the role asked for), listed or not")
    counts: list[ClientCount] = Field(description="live clients per role and side, by role then lane")
    offset: int = Field(default=0, description="how many clients before the first listed")
    next_offset: int | None = Field(default=None, description="the offset of the next page (None: none after)")


def lane_needs_gray(gray: bool | None, lane: str | None) -> str | None:
    """The lane to store with a flag: none for ``gray`` (as rows from before lanes); refused unless the flag is on."""
    if lane is not None and gray is not True:
        raise ValueError(f"lane {lane} needs gray true (a lane is named only for clients put in it)")
    return None if lane == GRAY_LANE else lane


class FlagPut(BaseModel):
    gray: bool | None = Field(description="the client's grayFlag; null lets the group's rules decide")
    lane: LaneName | None = Field(default=None, description="with gray true: the lane (default gray)")
    reason: Reason

    @model_validator(mode="after")
    def _lane_with_gray(self) -> Self:
        self.lane = lane_needs_gray(self.gray, self.lane)
        return self


class FlagResult(BaseModel):
    group: str
    client_id: str
    explicit_gray: bool | None
    clients: list[ClientView]
    explicit_lane: str | None = None


class SwitchPut(BaseModel):
    enabled: bool
    reason: Reason


class OrphanPolicyPut(BaseModel):
    policy: OrphanPolicy
    reason: Reason


class ConsumptionPut(BaseModel):
    fifo: bool | None = Field(default=None, strict=True, description="stock pop consumers get one message in "
                              "flight per queue, in order; null: unchanged")
    max_attempts: MaxAttempts | None = Field(default=None, description="deliveries of a message before it goes "
                                             "to %DLQ%group; null: unchanged")
    reason: Reason


class WeightPut(BaseModel):
    weight: GrayWeight = Field(description="percent (0..100) of each topic's normal queues the gray consumers take")
    reason: Reason


class RetiredPut(BaseModel):
    retired: bool = Field(strict=True, description="true: the gray consumers release every queue and consume "
                          "nothing (RETIRED); false: they consume again")
    reason: Reason


class RuleCreate(BaseModel):
    selector: Annotated[Labels, Field(min_length=1, description="labels a client must all carry; a value is a "
                                      "glob (fnmatch, case-sensitive: * any run, ? one character, [..] a set), so "
                                      "host=orders-v2-* matches every host starting orders-v2-")]
    gray: bool
    lane: LaneName | None = Field(default=None, description="with gray true: the lane matching clients are in "
                                  "(default gray)")
    reason: Reason

    @model_validator(mode="after")
    def _lane_with_gray(self) -> Self:
        self.lane = lane_needs_gray(self.gray, self.lane)
        return self


class RuleView(BaseModel):
    id: int
    group: str
    selector: dict[str, str]
    gray: bool
    position: int
    created_at: datetime
    lane: str | None = Field(default=None, description="the lane other than gray a true rule puts clients in "
                             "(absent: gray for a true rule, so a rule without lanes reads as before)")

    @model_serializer(mode="wrap")
    def _gray_lane_unsaid(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if self.lane is None:
            data.pop("lane", None)
        return data


class AllGroupsRuleView(BaseModel):
    """A rule of every group (``/v1/rules``): it applies after each group's own rules."""

    id: int
    selector: dict[str, str]
    gray: bool
    lane: str | None
    position: int
    created_at: datetime


class LaneOrphanPolicyPut(BaseModel):
    policy: OrphanPolicy | None = Field(description="hold or adopt the lane's queues no consumer of the lane in the "
                                        "group serves; null: back to the default")
    reason: Reason


class GroupLaneView(BaseModel):
    """One lane as a group sees it (``/v1/groups/{group}/lanes``)."""

    lane: str
    clients: list[str] = Field(description="live clients of the group in the lane (desired or reported), as "
                               "'ID (ROLE)'")
    taking_part: bool
    orphan_policy: OrphanPolicy
    orphan_policy_override: OrphanPolicy | None = None
    slots: dict[str, int] = Field(description="topic -> the slot the lane holds on it")
    weight: int = Field(default=0, description="percent of each topic's base queues the lane's consumers take; "
                        "shown when above 0 (an answer without weights reads as before)")

    @model_serializer(mode="wrap")
    def _no_weight_unsaid(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_zero_weight(handler(self))


class TopicLanes(BaseModel):
    """A topic's lane slots and which lane holds which (``/v1/topics/{topic}/lanes/{lane}``)."""

    topic: str
    lane_slots: int
    lanes: dict[str, int]


class GroupView(BaseModel):
    group: str
    gray_switch: bool
    orphan_policy: OrphanPolicy
    gray_weight: int
    gray_retired: bool = False
    fifo: bool = False
    max_attempts: int = 16
    created_at: datetime
    updated_at: datetime


class GroupSummary(GroupView):
    live_clients: int = Field(description="clients (every role) whose registration has not expired")


class CutoverCreate(BaseModel):
    kind: CutoverKind
    mode: CutoverMode = Field(default=CutoverMode.DRAIN, description="promote/rollback: drain or adopt; rollout: "
                              "promote or hold (what follows the last step)")
    producer_groups: list[GroupName] = Field(default_factory=list, max_length=100)
    lane: LaneName = Field(default=GRAY_LANE, description="the lane it promotes or rolls back (a rollout: gray)")

    @model_validator(mode="after")
    def _mode_of_kind(self) -> CutoverCreate:
        allowed = MODES_OF_KIND[self.kind]
        if self.mode not in allowed:
            raise ValueError(f"a {self.kind} takes mode {' or '.join(allowed)}, not {self.mode}")
        return self


class CutoverPatch(BaseModel):
    state: CutoverState | None = None
    step: Annotated[Text | None, Field(max_length=2000)] = None
    result: Annotated[dict[str, Any] | None, AfterValidator(_storable_json)] = None


class CutoverView(BaseModel):
    id: int
    group: str
    kind: CutoverKind
    mode: CutoverMode
    producer_groups: list[str]
    state: CutoverState
    step: str | None
    result: dict[str, Any] | None
    started_by: str
    started_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    lane: str = Field(default=GRAY_LANE, description="the lane it promotes or rolls back (shown unless gray)")

    @model_serializer(mode="wrap")
    def _gray_lane_unsaid(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if self.lane == GRAY_LANE:
            data.pop("lane", None)
        return data


class GroupDetail(GroupView):
    rules: list[RuleView]
    running_cutover: CutoverView | None


class AuditView(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    actor: str
    at: datetime
    object_type: str
    object_id: str
    group: str | None = Field(validation_alias="group_name")
    action: str
    before: Any
    after: Any
    reason: str | None


class ErrorBody(BaseModel):
    """Every error answer: a short ``error`` and a ``detail`` (text, field errors or an object)."""

    error: str
    detail: Any = None


Pattern = Annotated[str, _rule(check_pattern), _documented(r"^[A-Za-z0-9%|_*?-]{1,127}$", PATTERN_RULE)]
ConsumePattern = Annotated[
    str, _rule(check_consume_right),
    _documented(r"^[A-Za-z0-9%|_*?-]{1,127}(:[A-Za-z0-9%|_*?-]{1,127})?$",
                "GROUP_PATTERN or GROUP_PATTERN:TOPIC_PATTERN"),
]


BrokerNamePattern = Annotated[
    str, _rule(check_broker_right),
    _documented(r"^[A-Za-z0-9%|_*?-]{1,127}(:[0-9*?]{1,10})?$", "NAME_PATTERN or NAME_PATTERN:REPLICA_ID_PATTERN"),
]


class PrincipalCreate(BaseModel):
    """A new principal; patterns are globs (``*`` any run, ``?`` one character)."""

    name: PrincipalName
    produce: list[Pattern] = Field(default_factory=list, max_length=100, description="topic patterns")
    consume: list[ConsumePattern] = Field(default_factory=list, max_length=100)
    admin: bool = False
    broker: bool = False
    broker_names: list[BrokerNamePattern] | None = Field(
        default=None, max_length=100,
        description="with broker: the broker names (and replica ids) it may register as; absent: the broker named "
                    "like the principal, any replica id (\"*\": any broker)")
    access_key: bool = Field(default=False, description="also issue an access key and secret key, with the same "
                             "rights, for stock RocketMQ 5 clients (their SDKs sign calls with them)")

    @model_validator(mode="after")
    def _bind_broker_names(self) -> PrincipalCreate:
        if self.broker_names and not self.broker:
            raise ValueError("broker_names need the broker right (broker: true)")
        if self.broker and self.broker_names is None:
            self.broker_names = [self.name]
        return self


class PrincipalView(BaseModel):
    name: str
    produce: list[str]
    consume: list[str]
    admin: bool
    broker: bool
    broker_names: list[str] = Field(description="the broker names (NAME_PATTERN[:REPLICA_ID_PATTERN]) it may "
                                    "register as")
    access_key: str | None = Field(default=None, description="its access key for stock RocketMQ 5 clients (never "
                                   "the secret); None: none issued")
    created_at: datetime
    updated_at: datetime


class PrincipalDigest(BaseModel):
    """What a broker needs to check a token itself: its SHA-256 and the principal's rights."""

    name: str
    token_sha256: str
    produce: list[str]
    consume: list[str]
    admin: bool
    broker: bool
    broker_names: list[str]
    access_key: str | None = None
    secret_key: str | None = Field(default=None, description="the access key's secret: a broker checks the HMAC "
                                   "signatures of stock clients with it (only brokers and admins read this list)")


class PrincipalDigests(BaseModel):
    version: str = Field(description="changes whenever a principal is added, removed, rotated or changed, or the "
                         "bootstrap admin or broker tokens change")
    principals: list[PrincipalDigest]


class PrincipalToken(BaseModel):
    """The principal's token, shown this once (the name server keeps only its SHA-256), and its access key and
    secret key when it has them (the secret shown this once too)."""

    name: str
    token: str
    access_key: str | None = None
    secret_key: str | None = None
