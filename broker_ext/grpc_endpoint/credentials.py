"""Who a stock RocketMQ 5 client is: its signed ``authorization`` metadata mapped to a graymq principal.

The SDKs sign every call (``rocketmq/v5/util/signature.py`` in the Python SDK)::

    authorization: MQv2-HMAC-SHA1 Credential=<access key>, SignedHeaders=x-mq-date-time, Signature=<hex>
    x-mq-date-time: 20261127T013400Z

where the signature is HMAC-SHA1 of ``x-mq-date-time`` keyed with the secret key. graymq brokers know principals
by token (DESIGN §7.3), so until the name server issues access keys of their own, **a principal's token is both
the access key and the secret key** (``Credentials(token, token)`` in the SDK): the broker finds the principal by
the access key's digest, checks the signature with it, and refuses a date-time more than ``MAX_SKEW_S`` away
from its clock in UTC (a replayed header; the Python SDK formats its local time with a ``Z``, so its processes
run with ``TZ=UTC``, as containers do by default). A refusal is RocketMQ's ``UNAUTHORIZED``. In dev mode a call
without a valid credential acts as the ``dev`` principal, as on the broker port.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from graymq.broker_ext.grpc_endpoint.status import RocketMQStatusError
from graymq.broker_ext.principals import DEV_PRINCIPAL, Principal, token_digest
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2

SCHEME = "MQv2-HMAC-SHA1"
DATE_TIME_FORMAT = "%Y%m%dT%H%M%SZ"
MAX_SKEW_S = 15 * 60  # RocketMQ's tolerance for a request's x-mq-date-time
_AUTHORIZATION = re.compile(
    rf"^{re.escape(SCHEME)} Credential=(?P<ak>[^,\s]*), *SignedHeaders=(?P<headers>[^,\s]+), "
    r"*Signature=(?P<sig>[0-9a-fA-F]+)$"
)


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated call: the principal, the token it proved (``None``: dev mode without one), the SDK's
    client id and the labels the name server's gray rules can match (``host``, ``language``, ``namespace``)."""

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
    """``authenticate(metadata)``: the call's ``Caller``, or ``RocketMQStatusError(UNAUTHORIZED)``."""

    def __init__(self, principal_of: Callable[[str], Principal | None], *, dev_mode: bool,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._principal_of = principal_of  # token digest -> principal (the broker's principal table)
        self.dev_mode = dev_mode
        self._now = now

    def authenticate(self, metadata: Mapping[str, str]) -> Caller:
        client_id = metadata.get("x-mq-client-id", "")
        labels = client_labels(client_id, metadata)
        try:
            principal, token = self._verify(metadata)
        except RocketMQStatusError:
            if not self.dev_mode:
                raise
            return Caller(DEV_PRINCIPAL, None, client_id, labels)
        return Caller(principal, token, client_id, {**labels, "principal": principal.name})

    def _verify(self, metadata: Mapping[str, str]) -> tuple[Principal, str]:
        match = _AUTHORIZATION.match(metadata.get("authorization", ""))
        if match is not None and not match["ak"] or "authorization" not in metadata:
            raise _refused("no credentials: set the SDK's access key and secret key (a graymq principal's token for "
                           "both)")
        if match is None or match["headers"].lower() != "x-mq-date-time":
            raise _refused(f"authorization is not '{SCHEME} Credential=..., SignedHeaders=x-mq-date-time, "
                           "Signature=...'")
        date_time = metadata.get("x-mq-date-time", "")
        try:
            signed_at = datetime.strptime(date_time, DATE_TIME_FORMAT).replace(tzinfo=UTC)
        except ValueError:
            raise _refused(f"x-mq-date-time {date_time!r} is not {DATE_TIME_FORMAT}") from None
        if abs((self._now() - signed_at).total_seconds()) > MAX_SKEW_S:
            raise _refused(f"x-mq-date-time {date_time} is more than {MAX_SKEW_S} s from the broker's clock")
        token = match["ak"]
        principal = self._principal_of(token_digest(token))
        if principal is None or not hmac.compare_digest(signature(token, date_time), match["sig"].lower()):
            raise _refused("invalid credentials: the access key and the secret key are a principal's token")
        return principal, token


def _refused(message: str) -> RocketMQStatusError:
    return RocketMQStatusError(v2.UNAUTHORIZED, message)
