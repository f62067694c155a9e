"""Broker settings: one pydantic-settings class, ``GRAYMQ_BROKER_*`` environment variables."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from graymq.protocol.constants import DELAY_LEVELS_S
from graymq.protocol.errors import ConfigError
from graymq.protocol.frame import DEFAULT_MAX_FRAME_SIZE
from graymq.protocol.names import check_broker_name
from graymq.protocol.properties import PropertyLimits
from graymq.protocol.record import MAX_RECORD_SIZE

_LIMITS = PropertyLimits()  # the defaults


class BrokerSettings(BaseSettings):
    """Everything a broker process needs; CLI flags override the environment."""

    model_config = SettingsConfigDict(env_prefix="GRAYMQ_BROKER_", extra="ignore", populate_by_name=True)

    name: str = "broker-a"
    host: str = "127.0.0.1"
    port: int = Field(10911, ge=0, le=65535)
    advertised_address: str = ""  # host:port clients should dial; defaults to the bound address
    store_dir: Path = Path("./graymq-data/broker")
    nameserver: str = ""  # comma-separated name server URLs; empty = standalone
    token: str = Field("", repr=False)  # GRAYMQ_BROKER_TOKEN: a principal with the broker right
    # GRAYMQ_DEV_MODE (shared with the name server) or --dev: authentication off, logged as a warning
    dev_mode: bool = Field(False, validation_alias="GRAYMQ_DEV_MODE")
    tls_cert: Path | None = None  # with tls_key: the broker port speaks TLS only
    tls_key: Path | None = None
    auth_timeout_s: float = Field(5.0, gt=0)  # a connection must authenticate this soon (outside dev mode)
    # connections not authenticated yet: a budget of their own, within max_connections, and per peer address
    max_unauthenticated_connections: int = Field(512, ge=1)
    max_unauthenticated_per_address: int = Field(64, ge=1)
    idle_timeout_s: float = Field(180.0, gt=0)  # a connection silent this long (nothing in flight) is closed
    max_connections: int = Field(4096, ge=1)  # connections beyond it are closed at once
    # frames an unauthenticated connection may send (AUTHENTICATE is small): what a stranger can make us buffer
    unauthenticated_frame_size: int = Field(64 * 1024, ge=1024)
    max_buffered_bytes: int = Field(256 << 20, ge=1 << 20)  # partial frames buffered over every connection
    flush: Literal["async", "sync"] = "async"
    flush_interval_ms: int = Field(200, ge=1)
    segment_size: int = Field(1 << 30, ge=4096)  # commit log segment bytes (an existing store keeps its own)
    cq_units_per_file: int = Field(300_000, ge=1)  # consume-queue units (20 bytes) per preallocated file
    retention_hours: float = Field(72.0, gt=0)
    # the store's own settings, handed to it as they are (broker_ext/store/message_store.py StoreSettings)
    sync_flush_timeout_ms: int = Field(5_000, ge=1)  # sync flush: a send whose flush takes longer fails
    disk_warn_ratio: float = Field(0.75, gt=0, le=1)  # above: retention deletes the oldest segments even if young
    disk_critical_ratio: float = Field(0.90, gt=0, le=1)  # above: writes are refused (DISK_FULL)
    max_message_size: int = Field(4 << 20, ge=1, le=MAX_RECORD_SIZE // 2)  # body bytes
    # a producer's message properties, on every send path (protocol/properties.py); UTF-8 bytes, tag and keys
    # count as values
    max_properties: int = Field(_LIMITS.count, ge=1)
    max_property_name_size: int = Field(_LIMITS.name_size, ge=1)
    max_property_value_size: int = Field(_LIMITS.value_size, ge=1)
    max_properties_size: int = Field(_LIMITS.total_size, ge=1, le=MAX_RECORD_SIZE // 2)
    store_host: str = ""  # "host:port" stamped into every record
    checkpoint_interval_ms: int = Field(1_000, ge=1)
    retention_interval_ms: int = Field(10_000, ge=1)
    metrics_port: int | None = Field(None, ge=0, le=65535)
    grpc_port: int | None = Field(None, ge=0, le=65535)  # RocketMQ 5 gRPC for stock SDKs; TLS with tls_cert/key too
    # the gRPC port's budgets (grpc_endpoint/budgets.py): over one, a call is refused TOO_MANY_REQUESTS and counted
    grpc_max_connections: int = Field(4096, ge=1)  # beyond it new connections are closed at once (and counted)
    grpc_max_streams_per_principal: int = Field(1024, ge=1)  # Telemetry streams open
    grpc_max_streams_per_connection: int = Field(64, ge=1)
    grpc_max_client_ids_per_principal: int = Field(256, ge=1)  # stock client ids in use
    grpc_max_registrations_per_principal: int = Field(512, ge=1)  # (client id, group) registrations heartbeated
    grpc_max_receives_per_principal: int = Field(1024, ge=1)  # ReceiveMessage long polls in flight
    grpc_max_receives_per_connection: int = Field(256, ge=1)
    # a PushConsumer's delivery (auto_renew) is invisible this long at a time, renewed while its client is connected
    grpc_auto_renew_invisible_ms: int = Field(60_000, ge=1_000, le=12 * 3600_000)
    max_frame_size: int = Field(DEFAULT_MAX_FRAME_SIZE, ge=1024)
    auto_create_topic: bool = False
    default_queue_nums: int = Field(8, ge=1)
    default_gray_queue_nums: int = Field(2, ge=0)
    retry_queue_nums: int = Field(4, ge=1)
    retry_gray_queue_nums: int = Field(2, ge=0)
    register_interval_s: float = Field(3.0, gt=0)
    client_expiry_s: float = Field(120.0, gt=0)
    queue_lease_s: float = Field(30.0, gt=0)  # a queue lease not renewed (heartbeat, pull) this long ends
    max_long_poll_ms: int = Field(30_000, ge=0)
    delay_levels_s: Annotated[tuple[float, ...], NoDecode] = DELAY_LEVELS_S
    # A broker set: brokers with one name, distinct replica ids and a replication mode (None: a single copy).
    replica_id: int = Field(0, ge=0, le=63)
    replication: Literal["sync", "async"] | None = None
    replication_timeout_s: float = Field(5.0, gt=0)  # sync: a send not stored by the in-sync followers in time fails
    replica_lag_s: float = Field(3.0, gt=0)  # a follower that has not fetched this long leaves the in-sync set
    replica_lag_bytes: int = Field(8 << 20, ge=0)  # a follower further behind leaves it (and rejoins once closer)

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        problem = check_broker_name(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("delay_levels_s", mode="before")
    @classmethod
    def _parse_levels(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(float(v) for v in value.split(",") if v.strip())
        return value

    @model_validator(mode="after")
    def _check_tls_pair(self) -> BrokerSettings:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("--tls-cert and --tls-key go together")
        if self.disk_warn_ratio > self.disk_critical_ratio:
            raise ValueError(f"disk_warn_ratio {self.disk_warn_ratio} is above disk_critical_ratio "
                             f"{self.disk_critical_ratio}: retention must start before writes are refused")
        if self.replication is not None and not self.nameserver:
            raise ValueError("--replication needs a name server: it elects the set's leader")
        return self

    def refuse_insecure(self) -> None:
        """Outside dev mode: ``ConfigError`` without a broker token and a name server to learn principals from,
        or with topics created on send (topics are created by admins through the name server)."""
        if self.dev_mode:
            return
        hint = " (or run with --dev / GRAYMQ_DEV_MODE=true for local use: authentication off)"
        if not self.token.strip():
            raise ConfigError("no broker token: set GRAYMQ_BROKER_TOKEN to the token of a principal with the broker "
                              "right (graymq principal add NAME --broker)" + hint)
        if not self.nameserver_urls:
            raise ConfigError("no name server: outside dev mode a broker learns its principals from one "
                              "(--nameserver URL)" + hint)
        if self.auto_create_topic:
            raise ConfigError("--auto-create-topic is for dev mode only: topics are created through the name server "
                              "(graymq topic create)")

    @property
    def property_limits(self) -> PropertyLimits:
        return PropertyLimits(self.max_properties, self.max_property_name_size, self.max_property_value_size,
                              self.max_properties_size)

    @property
    def nameserver_urls(self) -> list[str]:
        return [u.strip().rstrip("/") for u in self.nameserver.split(",") if u.strip()]
