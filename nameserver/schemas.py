"""Request and response bodies of the REST API (``/v1``)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from graymq.protocol.constants import check_topic_name
from graymq.protocol.gray import gray_queue_ids

# Names that appear in URL paths: no whitespace and no slash.
Name = Annotated[str, StringConstraints(min_length=1, max_length=255, pattern=r"^[^\s/]+$")]
Reason = Annotated[str | None, Field(default=None, max_length=2000)]
Role = Literal["consumer", "producer", "spark"]
ClientState = Literal["GRAY", "DRAINING", "NORMAL"]
OrphanPolicy = Literal["hold", "adopt"]
CutoverKind = Literal["promote", "rollback"]
CutoverMode = Literal["drain", "adopt"]
CutoverState = Literal["RUNNING", "SUCCEEDED", "FAILED", "ABORTED"]
Labels = dict[
    Annotated[str, StringConstraints(min_length=1, max_length=255)], Annotated[str, Field(max_length=255)]
]

# RocketMQ permission bits: READ 4, WRITE 2, INHERIT 1.
DEFAULT_PERM = 6
# Bounds on what one heartbeat may carry (a report is stored whole on every beat).
MAX_LABELS = 64
MAX_TOPICS = 10_000
MAX_QUEUES = 100_000
MAX_WATCH_S = 60.0


def _check_topic(topic: str) -> str:
    problem = check_topic_name(topic)
    if problem:
        raise ValueError(problem)
    return topic


class QueueLayout(BaseModel):
    """How many queues a topic has per broker, how many of them are gray, and its permissions."""

    queue_nums: int = Field(ge=1, le=1024)
    gray_queue_nums: int = Field(default=0, ge=0)
    perm: int = Field(default=DEFAULT_PERM, ge=0, le=7)

    @model_validator(mode="after")
    def _gray_within_queues(self) -> Self:
        gray_queue_ids(self.queue_nums, self.gray_queue_nums)  # raises ValueError when out of range
        return self


class TopicConfig(QueueLayout):
    topic: str

    @model_validator(mode="after")
    def _valid_name(self) -> Self:
        _check_topic(self.topic)
        return self


class TopicPut(QueueLayout):
    reason: Reason


class TopicView(TopicConfig):
    created_at: datetime
    updated_at: datetime


class BrokerHeartbeat(BaseModel):
    broker_name: Name
    address: Annotated[str, StringConstraints(min_length=1, max_length=255)]
    topics: list[TopicConfig] = Field(default_factory=list, max_length=MAX_TOPICS)

    @model_validator(mode="after")
    def _topics_once(self) -> Self:
        names = [t.topic for t in self.topics]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"topics listed more than once: {', '.join(repeated)}")
        return self


class BrokerHeartbeatResponse(BaseModel):
    lease_seconds: int
    topics: list[TopicConfig]


class BrokerView(BaseModel):
    broker_name: str
    address: str
    last_heartbeat: datetime
    lease_expires_at: datetime
    topics: list[str]


class BrokerRoute(BaseModel):
    broker_name: str
    address: str
    queue_nums: int
    gray_queue_nums: int
    perm: int


class TopicRoute(BaseModel):
    topic: str
    queue_nums: int
    gray_queue_nums: int
    brokers: list[BrokerRoute]


class ClientHeartbeat(BaseModel):
    group: Name
    client_id: Name
    role: Role
    labels: Labels = Field(default_factory=dict, max_length=MAX_LABELS)
    declared_gray: bool | None = Field(
        default=None, description="the flag the client was started with; used when no explicit flag or rule applies"
    )
    gray: bool = False
    state: ClientState = "NORMAL"
    topics: list[Annotated[str, StringConstraints(min_length=1, max_length=255)]] = Field(
        default_factory=list, max_length=MAX_TOPICS
    )
    queues: list[Annotated[str, StringConstraints(max_length=512)]] = Field(
        default_factory=list, max_length=MAX_QUEUES
    )


class QueueCounts(BaseModel):
    queue_nums: int
    gray_queue_nums: int


class ClientHeartbeatResponse(BaseModel):
    group: str
    client_id: str
    role: Role
    gray_switch: bool
    desired_gray: bool
    explicit_gray: bool | None
    gray: bool
    state: ClientState
    orphan_policy: OrphanPolicy
    topics: dict[str, QueueCounts]


class WatchedState(BaseModel):
    """The part of a heartbeat answer a client acts on; a watch returns once it differs."""

    desired_gray: bool
    gray_switch: bool
    orphan_policy: OrphanPolicy


class ClientWatch(BaseModel):
    group: Name
    client_id: Name
    role: Role
    known: WatchedState | None = Field(default=None, description="what the client knows; None: answer at once")
    timeout_s: float = Field(default=20.0, ge=0, le=MAX_WATCH_S, description="answer after this long at the latest")


class ClientView(BaseModel):
    client_id: str
    role: Role
    labels: dict[str, str]
    explicit_gray: bool | None
    declared_gray: bool | None = None
    desired_gray: bool
    gray: bool
    state: ClientState
    queues: list[str]
    topics: list[str]
    last_seen: datetime
    stale: bool = Field(
        default=False,
        description="no heartbeat for GRAYMQ_CLIENT_STALE_SECONDS: presumed gone (killed, partitioned) until it "
        "reports again or expires",
    )


class GroupClients(BaseModel):
    group: str
    gray_switch: bool
    orphan_policy: OrphanPolicy
    clients: list[ClientView]


class FlagPut(BaseModel):
    gray: bool | None = Field(description="the client's grayFlag; null lets the group's rules decide")
    reason: Reason


class FlagResult(BaseModel):
    group: str
    client_id: str
    explicit_gray: bool | None
    clients: list[ClientView]


class SwitchPut(BaseModel):
    enabled: bool
    reason: Reason


class OrphanPolicyPut(BaseModel):
    policy: OrphanPolicy
    reason: Reason


class RuleCreate(BaseModel):
    selector: Annotated[Labels, Field(min_length=1, description="labels a client must all carry")]
    gray: bool
    reason: Reason


class RuleView(BaseModel):
    id: int
    group: str
    selector: dict[str, str]
    gray: bool
    position: int
    created_at: datetime


class GroupView(BaseModel):
    group: str
    gray_switch: bool
    orphan_policy: OrphanPolicy
    created_at: datetime
    updated_at: datetime


class CutoverCreate(BaseModel):
    kind: CutoverKind
    mode: CutoverMode = "drain"
    producer_groups: list[Name] = Field(default_factory=list)


class CutoverPatch(BaseModel):
    state: CutoverState | None = None
    step: Annotated[str | None, Field(max_length=2000)] = None
    result: dict[str, Any] | None = None


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
