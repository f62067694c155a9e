"""Name server configuration from ``GRAYMQ_*`` environment variables (and CLI overrides)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from graymq.protocol.constants import LOG_LEVELS

DEFAULT_DB_URL = "sqlite:///./graymq-data/nameserver.db"
DEV_TOKEN = "dev-token"
DEV_TOKEN_NAME = "dev"
_TOKEN_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


class InsecureConfigError(ValueError):
    """The admin token configuration must not be served (no tokens, or the dev token, outside dev mode)."""


def normalize_db_url(url: str) -> str:
    """Check a database URL and pin PostgreSQL to the psycopg 3 driver.

    ``postgres://`` and ``postgresql://`` (what most deployments hand out) become
    ``postgresql+psycopg://``; SQLite must name a file.
    """
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ValueError(f"not a database URL: {url!r}") from exc
    backend = parsed.get_backend_name()
    if backend in ("postgres", "postgresql"):
        driver = parsed.drivername.partition("+")[2]
        if driver not in ("", "psycopg", "psycopg2"):
            raise ValueError(f"unsupported PostgreSQL driver {driver!r}; use postgresql+psycopg://")
        if not parsed.host and not parsed.query.get("host"):
            raise ValueError("a PostgreSQL URL needs a host: postgresql+psycopg://USER@HOST:PORT/DB")
        if not parsed.database:
            raise ValueError("a PostgreSQL URL needs a database name: postgresql+psycopg://USER@HOST:PORT/DB")
        parsed = parsed.set(drivername="postgresql+psycopg")
    elif backend == "sqlite":
        if parsed.database in (None, "", ":memory:"):
            raise ValueError("an in-memory SQLite database cannot be shared; give a file: sqlite:///PATH")
    else:
        raise ValueError(f"unsupported database {backend!r}: use postgresql+psycopg://... or sqlite:///PATH")
    return parsed.render_as_string(hide_password=False)


def parse_admin_tokens(raw: str, kind: str = "admin") -> dict[str, str]:
    """``"ops=secret1,ci=secret2"`` → ``{"ops": "secret1", "ci": "secret2"}`` (name → secret)."""
    tokens: dict[str, str] = {}
    for entry in filter(None, (part.strip() for part in raw.split(","))):
        name, sep, secret = entry.partition("=")
        name, secret = name.strip(), secret.strip()
        if not sep or not name or not secret:
            raise ValueError(
                f"{kind} tokens are NAME=SECRET pairs separated by commas, e.g. ops=s3cret,ci=t0ken"
            )
        if not _TOKEN_NAME.match(name):
            raise ValueError(f"{kind} token name {name!r} may only hold letters, digits, '.', '_' and '-'")
        if name in tokens:
            raise ValueError(f"{kind} token name {name!r} is given twice")
        tokens[name] = secret
    return tokens


class DatabaseSettings(BaseSettings):
    """Where the name server's database is (``GRAYMQ_DB_URL``); all that migrations need."""

    model_config = SettingsConfigDict(env_prefix="GRAYMQ_", extra="ignore")

    db_url: str = DEFAULT_DB_URL

    @field_validator("db_url")
    @classmethod
    def _check_db_url(cls, value: str) -> str:
        return normalize_db_url(value)


class NameServerSettings(DatabaseSettings):
    """Everything the name server reads from its environment; names are part of the Helm chart's contract."""

    host: str = "127.0.0.1"
    port: int = Field(default=9876, ge=0, le=65535, description="0 picks a free port")
    admin_tokens: Annotated[dict[str, str], NoDecode] = Field(default_factory=dict)
    broker_tokens: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=dict, description="bootstrap broker tokens, NAME=SECRET pairs: the broker right only (what "
        "a deployment gives its brokers before any principal exists)")
    dev_mode: bool = False
    broker_lease_seconds: int = Field(
        default=120, ge=1, description="at most this long a broker stays routed after its last registration (the "
        "lease of a broker that does not report its registration interval)")
    broker_lease_heartbeats: int = Field(
        default=4, ge=1, description="a broker that reports its registration interval stays routed this many "
        "intervals after its last registration (a killed broker leaves the routes that soon)")
    broker_lease_min_seconds: int = Field(
        default=6, ge=1, description="but at least this long: a busy name server or a short interval does not drop "
        "a live broker between two registrations")
    replica_lease_seconds: float = Field(
        default=4.0, gt=0, le=600,
        description="a broker set's leader lease: an in-sync follower takes over this long after the last renewal")
    client_expiry_seconds: int = Field(default=60, ge=1)
    client_stale_seconds: float = Field(
        default=15.0, gt=0,
        description="a client silent this long is stale: marked so; promote and rollback stop waiting for a stale "
        "consumer (not for a stale gray producer, which may still send) (3 heartbeats of a push consumer)",
    )
    health_sample_seconds: float = Field(
        default=5.0, ge=0.2, le=60,
        description="how often the console's health charts read the consumers' reports (a point each time, 15 min "
        "kept)",
    )
    heartbeat_concurrency: int = Field(
        default=2, ge=1, le=64,
        description="client heartbeat requests stored at a time, and as many watch views read (the others wait their "
        "turn, first come first served): the work is CPU-bound under one GIL, more at once only makes each finish "
        "later")
    heartbeat_queue_seconds: float = Field(
        default=2.0, gt=0, le=60,
        description="a heartbeat request that waited this long for its turn is answered 503 busy at once "
        "(its client beats again next interval): under a fleet's burst the queue stays shorter than clients wait")
    auto_migrate: bool = False
    default_gray_switch: bool = Field(
        default=True, description="gray switch of a group created by a client's first heartbeat"
    )
    log_level: str = "INFO"
    max_body_bytes: int = Field(default=1 << 20, ge=1024, description="larger request bodies get a 413")
    auth_failure_limit: int = Field(
        default=20, ge=1, description="failed authentications an address may have in a window before a 429"
    )
    auth_failure_window_s: float = Field(default=60.0, gt=0)
    tls_cert: Path | None = Field(default=None, description="PEM certificate: serve HTTPS only (with tls_key)")
    tls_key: Path | None = Field(default=None, description="PEM private key of tls_cert")

    @field_validator("admin_tokens", "broker_tokens", mode="before")
    @classmethod
    def _parse_tokens(cls, value: object, info: ValidationInfo) -> object:
        kind = "admin" if info.field_name == "admin_tokens" else "broker"
        return parse_admin_tokens(value, kind) if isinstance(value, str) else value

    @field_validator("log_level")
    @classmethod
    def _check_log_level(cls, value: str) -> str:
        if value.upper() not in LOG_LEVELS:
            raise ValueError(f"log level must be one of {', '.join(LOG_LEVELS)}")
        return value.upper()

    @model_validator(mode="after")
    def _check_tls_pair(self) -> NameServerSettings:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("--tls-cert (GRAYMQ_TLS_CERT) and --tls-key (GRAYMQ_TLS_KEY) go together: give both "
                             "or neither")
        return self

    def token_actors(self) -> dict[str, str]:
        """Secret → actor name of every accepted bearer token; refuses configurations unsafe to serve."""
        if not self.dev_mode:
            if not self.admin_tokens:
                raise InsecureConfigError(
                    "no admin tokens configured: set GRAYMQ_ADMIN_TOKENS=name=secret[,...] "
                    "(or run with --dev / GRAYMQ_DEV_MODE=true for local use)"
                )
            if DEV_TOKEN in self.admin_tokens.values():
                raise InsecureConfigError(
                    f"the built-in token {DEV_TOKEN!r} is only accepted in dev mode; configure a real secret"
                )
        actors = {secret: name for name, secret in self.admin_tokens.items()}
        if self.dev_mode:
            actors.setdefault(DEV_TOKEN, DEV_TOKEN_NAME)
        return actors

    def broker_token_actors(self) -> dict[str, str]:
        """Secret → name of every bootstrap broker token (``GRAYMQ_BROKER_TOKENS``); one an admin token shares is
        refused (it would lose its admin right)."""
        shared = set(self.broker_tokens.values()) & set(self.admin_tokens.values())
        if shared:
            raise InsecureConfigError("a token is both in GRAYMQ_ADMIN_TOKENS and GRAYMQ_BROKER_TOKENS: give brokers "
                                      "their own")
        return {secret: name for name, secret in self.broker_tokens.items()}
