"""Who a stock RocketMQ 5 client is: its signed ``authorization`` metadata mapped to a graymq principal.

The SDKs sign every call (``rocketmq/v5/util/signature.py`` in the Python SDK)::

    authorization: MQv2-HMAC-SHA1 Credential=<access key>, SignedHeaders=x-mq-date-time, Signature=<hex>
    x-mq-date-time: 20261127T013400Z

where the signature is HMAC-SHA1 of ``x-mq-date-time`` keyed with the secret key. Two kinds of credentials work:

- **An access key and secret key** (``graymq principal add NAME --access-key``), with the principal's rights. An
  HMAC can only be checked with its secret, so the name server keeps the secret key (never a token: those stay
  SHA-256 digests) and hands it to brokers with the principals' digests, over the broker-authenticated
  ``GET /v1/principals/digests`` they already read; the broker caches it with them in its owner-only
  ``config/principals.json``. ``principal rotate`` issues a new secret key for the same access key.
- **A principal's token as both the access key and the secret key** (``Credentials(token, token)`` in the SDK), as
  before access keys existed: the broker finds the principal by the access key's digest and checks the signature
  with it.

The broker refuses a date-time more than ``MAX_SKEW_S`` away from its clock in UTC (a replayed header; the Python
SDK formats its local time with a ``Z``, so its processes run with ``TZ=UTC``, as containers do by default). Every
refusal is RocketMQ's ``UNAUTHORIZED``. An access key the broker does not know makes it read the principals again
first (a principal added a moment ago works at once), and so does a wrong signature of a known one (its secret
rotated a moment ago), sharing the broker port's ``PrincipalRefresh``: at most one read per interval for both
ports, and none for an address that already failed the same way in the window. Failures count against the
caller's address in the broker port's ``FailedAuthThrottle``: an unknown access key once per window, each wrong
signature of a known one every time (a guess); past the limit the address is refused for a while. In
dev mode a call without a valid credential acts as the ``dev`` principal, as on the broker port.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from graymq.broker_ext.grpc_endpoint.status import RocketMQStatusError
from graymq.broker_ext.security.principals import DEV_PRINCIPAL, Principal, PrincipalTable, token_digest
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from graymq.protocol.throttle import FailedAuthThrottle

SCHEME = "MQv2-HMAC-SHA1"
DATE_TIME_FORMAT = "%Y%m%dT%H%M%SZ"
MAX_SKEW_S = 15 * 60  # RocketMQ's tolerance for a request's x-mq-date-time
_AUTHORIZATION = re.compile(
    rf"^{re.escape(SCHEME)} Credential=(?P<ak>[^,\s]*), *SignedHeaders=(?P<headers>[^,\s]+), "
    r"*Signature=(?P<sig>[0-9a-fA-F]+)$"
)


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated call: the principal, the credential it proved (a token, or ``ACCESS_KEY:SECRET_KEY``: the
    name server takes either as a bearer token; ``None``: dev mode without one), the SDK's client id and the labels
    the name server's gray rules can match (``host``, ``language``, ``namespace``)."""

    principal: Principal
    token: str | None
    client_id: str
    labels: dict[str, str] = field(default_factory=dict)


def signature(secret: str, date_time: str) -> str:
    """HMAC-SHA1 of ``date_time`` keyed with ``secret``, in hex, as the SDKs sign.

    >>> signature("s3cret", "20261127T013400Z")
    '85bf75e463075342f8bdf72648dc85ea906bed9b'
    """
    return hmac.new(secret.encode(), date_time.encode(), hashlib.sha1).hexdigest()


def client_labels(client_id: str, metadata: Mapping[str, str]) -> dict[str, str]:
    """Labels of a stock client: ``host`` (the client id's host part: the pod name on Kubernetes), ``language`` and
    ``namespace`` when sent.

    >>> client_labels("orders-v2-7f9c@12@0@k3x", {"x-mq-language": "PYTHON"})
    {'host': 'orders-v2-7f9c', 'language': 'python'}
    """
    labels = {"host": client_id.split("@", 1)[0]} if client_id else {}
    if language := metadata.get("x-mq-language", ""):
        labels["language"] = language.lower()
    if namespace := metadata.get("x-mq-namespace", ""):
        labels["namespace"] = namespace
    return labels


class Credentials:
    """``await authenticate(metadata, peer)``: the call's ``Caller``, or ``RocketMQStatusError(UNAUTHORIZED)``."""

    def __init__(self, principals: PrincipalTable, *, dev_mode: bool, throttle: FailedAuthThrottle,
                 refresh: Callable[[], Awaitable[None]] | None = None,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._principals = principals  # the broker's principal table (token digests, access keys)
        self.dev_mode = dev_mode
        self._throttle = throttle  # shared with the broker port: one budget of failures per address
        self._refresh = refresh  # reads the principals from a name server now (None: none configured)
        self._now = now

    async def authenticate(self, metadata: Mapping[str, str], peer: str = "") -> Caller:
        """``peer`` (gRPC's ``ipv4:HOST:PORT``) names the address failures count against."""
        client_id = metadata.get("x-mq-client-id", "")
        labels = client_labels(client_id, metadata)
        try:
            principal, token = await self._verify(metadata, peer.rpartition(":")[0])
        except RocketMQStatusError:
            if not self.dev_mode:
                raise
            return Caller(DEV_PRINCIPAL, None, client_id, labels)
        return Caller(principal, token, client_id, {**labels, "principal": principal.name})

    async def _verify(self, metadata: Mapping[str, str], address: str) -> tuple[Principal, str]:
        """The principal and the credential the broker registers the client with at the name server (a token, or
        ``ACCESS_KEY:SECRET_KEY``)."""
        access_key, signed, date_time = _signed_request(metadata, self._now())
        if not self.dev_mode and (wait := self._throttle.retry_after(address)) is not None:
            raise _refused(f"too many failed authentications from {address}: retry in {wait} s")
        found = self._checked(access_key, signed, date_time)
        # an unknown key counts once a window (a client retrying it), each wrong signature of a known one (a guess)
        failure = token_digest(access_key if found is None else f"{access_key}:{signed}")
        if not isinstance(found, tuple) and self._refresh is not None and not self.dev_mode and \
                not self._throttle.failed_before(address, failure):
            await self._refresh()  # added, or its secret rotated, a moment ago
            found = self._checked(access_key, signed, date_time)
        if not isinstance(found, tuple):
            self._throttle.failed(address, failure)
            raise _refused("invalid credentials: unknown access key (an access key and secret key from graymq "
                           "principal add --access-key, or a principal's token for both)" if found is None else
                           f"invalid credentials: the signature does not match access key {access_key}'s secret key")
        return found

    def _checked(self, access_key: str, signed: str, date_time: str) -> tuple[Principal, str] | bool | None:
        """(principal, credential for the name server) when the signature is right; ``False`` when the key is known
        and the signature wrong; ``None`` for an unknown key. The key is an issued access key, else a principal's
        token used as both."""
        if (issued := self._principals.by_access_key(access_key)) is not None:
            secret, principal = issued
            credential = f"{access_key}:{secret}"
        elif (principal := self._principals.get(token_digest(access_key))) is not None:
            secret = credential = access_key
        else:
            return None
        return (principal, credential) if hmac.compare_digest(signature(secret, date_time), signed) else False


def _signed_request(metadata: Mapping[str, str], now: datetime) -> tuple[str, str, str]:
    """(access key, signature in lower-case hex, date-time) of a well-formed, fresh signed request; else refused."""
    match = _AUTHORIZATION.match(metadata.get("authorization", ""))
    if match is not None and not match["ak"] or "authorization" not in metadata:
        raise _refused("no credentials: set the SDK's access key and secret key (from graymq principal add "
                       "--access-key, or a principal's token for both)")
    if match is None or match["headers"].lower() != "x-mq-date-time":
        raise _refused(f"authorization is not '{SCHEME} Credential=..., SignedHeaders=x-mq-date-time, "
                       "Signature=...'")
    date_time = metadata.get("x-mq-date-time", "")
    try:
        signed_at = datetime.strptime(date_time, DATE_TIME_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        raise _refused(f"x-mq-date-time {date_time!r} is not {DATE_TIME_FORMAT}") from None
    if abs((now - signed_at).total_seconds()) > MAX_SKEW_S:
        raise _refused(f"x-mq-date-time {date_time} is more than {MAX_SKEW_S} s from the broker's clock")
    return match["ak"], match["sig"].lower(), date_time


def _refused(message: str) -> RocketMQStatusError:
    return RocketMQStatusError(v2.UNAUTHORIZED, message)
