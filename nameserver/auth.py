"""Who is calling: bearer tokens resolved to a principal and its rights; checks that raise 401/403/429.

Tokens come from three places: the bootstrap admin tokens (``GRAYMQ_ADMIN_TOKENS``, name=secret,
compared in constant time), the bootstrap broker tokens (``GRAYMQ_BROKER_TOKENS``, alike, the broker
right only) and the principals table (the SHA-256 of the token is looked up; the token itself is
never stored). A principal's access key and secret key (for stock RocketMQ 5 clients) also authenticate, as
the bearer ``ACCESS_KEY:SECRET_KEY``: a broker registers such a client with the name server that way. In dev
mode authentication is off: a valid token still names the caller (the audit actor), anything else acts as
``dev`` with every right.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from graymq.nameserver.errors import Forbidden, TooManyFailures, Unauthorized
from graymq.nameserver.repositories.principals import PrincipalRepository
from graymq.nameserver.settings import DEV_TOKEN_NAME
from graymq.protocol.acl import ALL_RIGHTS, ANY_BROKER, Rights
from graymq.protocol.throttle import FailedAuthThrottle

_bearer = HTTPBearer(auto_error=False, description="a principal's token (GRAYMQ_TOKEN, GRAYMQ_BROKER_TOKEN) "
                     "or an admin token from GRAYMQ_ADMIN_TOKENS")
_CHALLENGE = {"WWW-Authenticate": "Bearer"}
# A bootstrap broker token is the operator's own (GRAYMQ_BROKER_TOKENS, set where the brokers are deployed): any name
BOOTSTRAP_BROKER_NAMES = ("*",)
BROKER_RIGHTS = Rights(broker=True, brokers=ANY_BROKER)
TOKEN_PREFIX = "gmq_"
ACCESS_KEY_PREFIX = "GMQAK"


def new_token() -> str:
    """A fresh random token (32 random bytes)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def new_access_key() -> tuple[str, str]:
    """A fresh access key and secret key for stock RocketMQ 5 clients (neither holds ``:``, which joins them in
    the bearer credential ``ACCESS_KEY:SECRET_KEY``)."""
    return ACCESS_KEY_PREFIX + secrets.token_hex(10), secrets.token_urlsafe(30)


def token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def actor_for(token_actors: Mapping[str, str], presented: str) -> str | None:
    """The actor name of the presented token, comparing against every secret in constant time."""
    actor = None
    for secret, name in token_actors.items():
        if hmac.compare_digest(secret.encode(), presented.encode()):
            actor = name
    return actor


@dataclass(frozen=True)
class Caller:
    """An authenticated caller: its name (the audit actor) and what it may do."""

    name: str
    rights: Rights

    def require(self, allowed: bool, action: str) -> None:
        """403 ``FORBIDDEN: principal NAME may not ACTION`` unless ``allowed``."""
        if not allowed:
            raise Forbidden(detail=f"principal {self.name} may not {action}")


def _principal(request: Request, token: str) -> Caller | None:
    state = request.app.state
    actor = actor_for(state.token_actors, token)
    if actor is not None:
        return Caller(actor, ALL_RIGHTS)
    broker = actor_for(state.broker_token_actors, token)
    if broker is not None:
        return Caller(broker, BROKER_RIGHTS)
    access_key, colon, secret_key = token.partition(":")
    digest = token_sha256(token)
    with state.read_sessions() as session:
        if colon:  # ACCESS_KEY:SECRET_KEY, as a broker registers a stock client signed with an access key
            found = PrincipalRepository(session).by_access_key(access_key)
            if found is None or not hmac.compare_digest((found.secret_key or "").encode(), secret_key.encode()):
                return None
        else:
            found = PrincipalRepository(session).by_token_sha256(digest)
            if found is None or not hmac.compare_digest(found.token_sha256, digest):
                return None
        return Caller(found.name, Rights.of(found.produce, found.consume, found.admin, found.broker,
                                            found.broker_names))


def authenticated(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> Caller:
    """Dependency of every ``/v1`` route: the caller, or 401 (429 for an address failing too often)."""
    state = request.app.state
    throttle: FailedAuthThrottle = state.auth_throttle
    address = request.client.host if request.client else "unknown"
    dev_mode = state.settings.dev_mode
    if not dev_mode and (wait := throttle.retry_after(address)) is not None:
        raise TooManyFailures(detail=f"too many failed authentications from {address}: retry in {wait} s",
                              headers={"Retry-After": str(wait)})
    caller = _principal(request, credentials.credentials) if credentials else None
    if caller is not None:
        return caller
    if dev_mode:
        return Caller(DEV_TOKEN_NAME, ALL_RIGHTS)
    throttle.failed(address, token_sha256(credentials.credentials) if credentials else None)
    if credentials is None:
        raise Unauthorized(detail="missing bearer token: send Authorization: Bearer <token> "
                           "(GRAYMQ_TOKEN for clients, GRAYMQ_BROKER_TOKEN for brokers, GRAYMQ_ADMIN_TOKEN for "
                           "admin commands)", headers=_CHALLENGE)
    raise Unauthorized(detail="invalid bearer token", headers=_CHALLENGE)


Authenticated = Annotated[Caller, Depends(authenticated)]


def admin_actor(caller: Authenticated) -> str:
    """Dependency of every admin mutation: the caller's name, or 403 unless it is an admin."""
    caller.require(caller.rights.admin, "administer (an admin right is needed)")
    return caller.name


def broker_caller(caller: Authenticated) -> Caller:
    """Dependency of broker registration and its watch: 403 unless the caller has the broker right."""
    caller.require(caller.rights.admin or caller.rights.broker, "register brokers (a broker right is needed)")
    return caller


AdminActor = Annotated[str, Depends(admin_actor)]
BrokerCaller = Annotated[Caller, Depends(broker_caller)]


def check_client(caller: Caller, group: str, role: str | None, topics: list[str] | Any = ()) -> None:
    """403 unless ``caller`` may act as a ``role`` client of ``group`` on ``topics`` (``None``: any role)."""
    rights = caller.rights
    if role == "producer":
        caller.require(bool(rights.produce) or rights.admin, f"produce as group {group} (no produce right)")
        for topic in topics:
            caller.require(rights.may_produce(topic), f"produce to topic {topic}")
    elif role is None:
        caller.require(rights.may_use_group(group), f"act for group {group}")
    else:
        caller.require(rights.may_consume(group), f"consume group {group}")
        for topic in topics:
            caller.require(rights.may_consume_topic(group, topic), f"consume topic {topic} in group {group}")


def names_producer_group(rights: Rights, group: str) -> bool:
    """Whether ``rights`` name producer group ``group``: admin, a consume right on it, or a produce pattern matching
    it. Only such a producer takes part in the group's release (is gray, honours gray marks): one that does not
    cannot hold up a promote or rollback of it.

    >>> orders = Rights(produce=("ORDER_*",))
    >>> names_producer_group(orders, "ORDER_APP"), names_producer_group(orders, "GID_A")
    (True, False)
    """
    return rights.admin or rights.may_consume(group) or any(fnmatchcase(group, p) for p in rights.produce)


def check_gray_producer(caller: Caller, group: str, reported_gray: bool, declared_gray: bool | None,
                        gray_marks: bool | None) -> None:
    """403 for a producer heartbeat that reports or declares gray, or honours gray marks, in a producer group no right
    of the caller names (``names_producer_group``)."""
    if reported_gray or declared_gray or gray_marks:
        caller.require(names_producer_group(caller.rights, group),
                       f"send gray as producer group {group} (no produce or consume right names it)")


def check_broker(caller: Caller, broker_name: str, replica_id: int | None) -> None:
    """403 unless ``caller`` may register as broker ``broker_name`` (replica ``replica_id``; ``None``: no replicas),
    in one line naming the principal, the broker, the names it may use and how to fix it."""
    if caller.rights.may_act_as_broker(broker_name, replica_id):
        return
    what = f"broker {broker_name}" if replica_id is None else f"replica {replica_id} of broker {broker_name}"
    wanted = broker_name if replica_id is None else f"{broker_name}:{replica_id}"
    if not caller.rights.broker:
        fix = f"graymq principal add NAME --broker --broker-name {wanted} makes a principal that may"
    else:
        fix = (f"graymq principal add NAME --broker --broker-name {wanted} makes a principal that may (its token as "
               "GRAYMQ_BROKER_TOKEN), or run the broker under one of its names")
    covered = ", ".join(b.name if b.replica == "*" else f"{b.name}:{b.replica}" for b in caller.rights.brokers)
    raise Forbidden(detail=f"principal {caller.name} may not register as {what} (its broker names: "
                           f"{covered or 'none'}): {fix}")


def check_route(caller: Caller, topic: str) -> None:
    """403 unless ``caller`` may produce to or consume ``topic`` (a retry topic: consume its group)."""
    caller.require(caller.rights.may_use_topic(topic) or caller.rights.broker, f"produce to or consume topic {topic}")
