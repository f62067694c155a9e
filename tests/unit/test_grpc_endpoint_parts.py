"""The gRPC endpoint's parts without a network: RocketMQ's signature checked against a principal's token, and the
settings stock clients get back."""

from __future__ import annotations

import asyncio
import doctest
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from graymq.broker_ext.grpc_endpoint import credentials, route, settings
from graymq.broker_ext.grpc_endpoint.credentials import DATE_TIME_FORMAT, MAX_SKEW_S, Credentials, signature
from graymq.broker_ext.grpc_endpoint.settings import EndpointLimits, merged_settings
from graymq.broker_ext.grpc_endpoint.status import RocketMQStatusError
from graymq.broker_ext.security.principals import DEV_PRINCIPAL, Principal, PrincipalTable, token_digest
from graymq.protocol.acl import Rights
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from graymq.protocol.throttle import FailedAuthThrottle

pytestmark = pytest.mark.unit

TOKEN = "gmq_orders-token"
ORDERS = Principal("orders", Rights.of(["ORDER_*"], [], False, False))
NOW = datetime(2026, 11, 27, 1, 30, tzinfo=UTC)


def metadata(token: str, at: datetime = NOW, secret: str | None = None, client_id: str = "orders-v2-x@7@0@k") -> dict:
    date_time = at.strftime(DATE_TIME_FORMAT)
    return {"x-mq-client-id": client_id, "x-mq-date-time": date_time, "x-mq-language": "PYTHON",
            "authorization": f"MQv2-HMAC-SHA1 Credential={token}, SignedHeaders=x-mq-date-time, "
                             f"Signature={signature(secret or token, date_time)}"}


class Check:
    """``authenticate`` run to completion, against a table holding the orders principal."""

    def __init__(self, dev_mode: bool) -> None:
        table = PrincipalTable(Path(tempfile.mkdtemp()) / "principals.json")
        table.apply({"version": "1", "principals": [{"name": "orders", "token_sha256": token_digest(TOKEN),
                                                     "produce": ["ORDER_*"], "consume": [], "broker_names": []}]})
        self.credentials = Credentials(table, dev_mode=dev_mode, throttle=FailedAuthThrottle(20, 60), now=lambda: NOW)

    def authenticate(self, meta: dict) -> credentials.Caller:
        return asyncio.run(self.credentials.authenticate(meta, "ipv4:127.0.0.1:5000"))


def check(dev_mode: bool = False) -> Check:
    return Check(dev_mode)


def test_doctests() -> None:
    for module in (credentials, route, settings):
        assert doctest.testmod(module).failed == 0


def test_a_token_signed_call_is_its_principal_with_labels_for_gray_rules() -> None:
    caller = check().authenticate(metadata(TOKEN))
    assert caller.principal == ORDERS and caller.token == TOKEN
    assert caller.labels == {"host": "orders-v2-x", "language": "python", "principal": "orders"}


@pytest.mark.parametrize(("meta", "reason"), [
    (metadata(TOKEN, secret="another"), "invalid credentials"),
    (metadata("gmq_unknown"), "invalid credentials"),
    (metadata(TOKEN, at=NOW - timedelta(seconds=MAX_SKEW_S + 1)), "from the broker's clock"),
    (metadata(TOKEN, at=NOW + timedelta(seconds=MAX_SKEW_S + 1)), "from the broker's clock"),
    ({**metadata(TOKEN), "x-mq-date-time": "yesterday"}, "is not %Y%m%dT%H%M%SZ"),
    ({**metadata(TOKEN), "authorization": "Bearer x"}, "authorization is not"),
    ({"x-mq-client-id": "a@1@0@x"}, "no credentials"),
    (metadata(""), "no credentials"),
])
def test_a_bad_credential_is_unauthorized_with_its_reason(meta: dict, reason: str) -> None:
    with pytest.raises(RocketMQStatusError) as refused:
        check().authenticate(meta)
    assert refused.value.code == v2.UNAUTHORIZED and reason in refused.value.message


def test_dev_mode_takes_a_call_without_a_valid_credential_as_dev() -> None:
    caller = check(dev_mode=True).authenticate({"x-mq-client-id": "pod-1@1@0@x"})
    assert caller.principal == DEV_PRINCIPAL and caller.token is None and caller.labels == {"host": "pod-1"}


def test_a_consumer_gets_the_brokers_redelivery_schedule_batch_size_and_long_polling_timeout() -> None:
    client = v2.Settings(client_type=v2.SIMPLE_CONSUMER, subscription=v2.Subscription(
        group=v2.Resource(name="GID_ORDERS"), receive_batch_size=1000))
    merged = merged_settings(client, EndpointLimits(max_body_size=1 << 20, long_polling_timeout_s=15.0,
                                                    delay_levels_s=(1.0, 5.0, 30.0)))
    assert merged.subscription.group.name == "GID_ORDERS"  # the client's own settings are kept
    assert [d.ToTimedelta().total_seconds() for d in merged.backoff_policy.customized_backoff.next] == [1, 5, 30]
    assert merged.backoff_policy.max_attempts == settings.CONSUMER_MAX_ATTEMPTS
    assert merged.subscription.receive_batch_size == settings.RECEIVE_BATCH_SIZE
    assert merged.subscription.long_polling_timeout.ToTimedelta().total_seconds() == 15.0
    assert merged.WhichOneof("pub_sub") == "subscription"
    assert not merged.subscription.fifo


def test_a_consumer_is_told_its_groups_fifo_and_max_attempts() -> None:
    client = v2.Settings(client_type=v2.SIMPLE_CONSUMER, subscription=v2.Subscription(
        group=v2.Resource(name="GID_ORDERS")))
    merged = merged_settings(client, EndpointLimits(), settings.GroupConsumption(fifo=True, max_attempts=3))
    assert merged.subscription.fifo and merged.backoff_policy.max_attempts == 3
