"""Credentials on a broker's gRPC endpoint outside dev mode: the stock SDK signs with a principal's token as access
key and secret and sends within its rights; a wrong secret, no credentials, a stale signed date-time or a topic
beyond the principal's rights are refused with RocketMQ's status for it; a client id belongs to the principal that
used it first."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest
from google.protobuf.message import Message

from graymq.broker_ext.grpc_endpoint.credentials import DATE_TIME_FORMAT, signature
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from graymq.protocol.rocketmq_v2 import service_pb2 as v2s
from graymq.protocol.rocketmq_v2 import service_pb2_grpc
from tests.support.stock_sdk import sdk_log, sdk_send
from tests.support.trust import StartProcess, add_principal, cli, start_secure_grpc_broker, start_secure_nameserver

pytestmark = pytest.mark.integration

TOPIC = "ORDER_PAID"


def call(address: str, method: str, request: Message, metadata: list[tuple[str, str]]) -> v2.Status:
    async def go() -> v2.Status:
        async with grpc.aio.insecure_channel(address) as channel:
            answer = await getattr(service_pb2_grpc.MessagingServiceStub(channel), method)(
                request, metadata=metadata, timeout=10)
            return answer.status  # type: ignore[no-any-return]

    return asyncio.run(go())


def query_route(address: str, metadata: list[tuple[str, str]]) -> v2.Status:
    return call(address, "QueryRoute", v2s.QueryRouteRequest(topic=v2.Resource(name=TOPIC)), metadata)


def signed(token: str, at: datetime, client_id: str = "test@1@0@x", secret: str | None = None
           ) -> list[tuple[str, str]]:
    """Metadata signed as the SDK signs: with ``token`` as access key and secret key, or with ``secret``."""
    date_time = at.strftime(DATE_TIME_FORMAT)
    return [("x-mq-client-id", client_id), ("x-mq-date-time", date_time),
            ("authorization", f"MQv2-HMAC-SHA1 Credential={token}, SignedHeaders=x-mq-date-time, "
                              f"Signature={signature(secret or token, date_time)}")]


def test_a_principals_token_signs_stock_sends_and_bad_credentials_are_refused_as_unauthorized(
        graymq_process: StartProcess, fresh_pg_url: str, tmp_path: Path) -> None:
    ns_url = start_secure_nameserver(graymq_process, fresh_pg_url)
    broker_token = add_principal(ns_url, "broker-a", "--broker")
    orders = add_principal(ns_url, "orders", "--produce", "ORDER_*")
    other = add_principal(ns_url, "other", "--produce", "OTHER_*")
    endpoint = start_secure_grpc_broker(graymq_process, ns_url, broker_token, tmp_path / "broker-a", TOPIC)[1]

    sent = sdk_send(endpoint, TOPIC, [{"body": "paid-1"}, {"body": "paid-2"}], tmp_path, ak=orders, sk=orders)
    assert all("message_id" in r for r in sent), sent

    refusals = {"wrong-secret": (orders, "not-the-secret", "40100, invalid credentials"),
                "no-credentials": ("", "", "40100, no credentials"),
                "beyond-rights": (other, other, "40300, principal other may not produce to or consume topic")}
    for name, (ak, sk, reason) in refusals.items():
        home = tmp_path / name
        (refused,) = sdk_send(endpoint, TOPIC, [{"body": "x"}], home, ak=ak, sk=sk)
        assert "message_id" not in refused, (name, refused)
        assert reason in sdk_log(home), (name, sdk_log(home)[-2000:])

    now = datetime.now(UTC)
    assert query_route(endpoint, signed(orders, now)).code == v2.OK
    stale = query_route(endpoint, signed(orders, now - timedelta(hours=1)))
    assert stale.code == v2.UNAUTHORIZED and "clock" in stale.message
    forged = query_route(endpoint, signed(orders, now)[:2] + [("authorization", signed(other, now)[2][1].replace(
        f"Credential={other}", f"Credential={orders}"))])
    assert forged.code == v2.UNAUTHORIZED and "invalid credentials" in forged.message

    message = v2.Message(topic=v2.Resource(name=TOPIC), body=b"pod-7", system_properties=v2.SystemProperties(
        message_id="01POD7", message_type=v2.NORMAL))
    pod = "pod-7@1@0@x"
    assert call(endpoint, "SendMessage", v2s.SendMessageRequest(messages=[message]), signed(orders, now, pod)).code \
        == v2.OK
    hijack = call(endpoint, "NotifyClientTermination", v2s.NotifyClientTerminationRequest(), signed(other, now, pod))
    assert hijack.code == v2.FORBIDDEN and f"client id {pod} is in use by principal orders" in hijack.message
    assert call(endpoint, "NotifyClientTermination", v2s.NotifyClientTerminationRequest(),
                signed(orders, now, pod)).code == v2.OK


def test_an_access_key_signs_stock_sends_at_once_and_its_rotated_secret_replaces_the_old(
        graymq_process: StartProcess, fresh_pg_url: str, tmp_path: Path) -> None:
    ns_url = start_secure_nameserver(graymq_process, fresh_pg_url)
    broker_token = add_principal(ns_url, "broker-a", "--broker")
    # registering once a minute: a principal added or rotated later is learned by the refresh a signature causes
    broker, endpoint = start_secure_grpc_broker(graymq_process, ns_url, broker_token, tmp_path / "broker-a", TOPIC,
                                                GRAYMQ_BROKER_REGISTER_INTERVAL_S="60")

    added = cli(ns_url, "principal", "add", "orders", "--produce", "ORDER_*", "--access-key", "--json")
    assert added.returncode == 0, added.stderr
    issued = json.loads(added.stdout)
    assert set(issued) == {"name", "token", "access_key", "secret_key"}
    ak, sk = issued["access_key"], issued["secret_key"]
    sent = sdk_send(endpoint, TOPIC, [{"body": "paid-1"}], tmp_path / "first", ak=ak, sk=sk)
    assert all("message_id" in r for r in sent), sent

    (wrong,) = sdk_send(endpoint, TOPIC, [{"body": "x"}], tmp_path / "wrong", ak=ak, sk="not-the-secret")
    assert "message_id" not in wrong
    assert "40100, invalid credentials: the signature does not match" in sdk_log(tmp_path / "wrong")

    rotated = cli(ns_url, "principal", "rotate", "orders", "--json")
    assert rotated.returncode == 0, rotated.stderr
    new_sk = json.loads(rotated.stdout)["secret_key"]
    assert json.loads(rotated.stdout)["access_key"] == ak and new_sk != sk
    sent = sdk_send(endpoint, TOPIC, [{"body": "paid-2"}], tmp_path / "rotated", ak=ak, sk=new_sk)
    assert all("message_id" in r for r in sent), sent
    now = datetime.now(UTC)
    old = query_route(endpoint, signed(ak, now, secret=sk))
    assert old.code == v2.UNAUTHORIZED and "signature does not match" in old.message
    assert "principals from name server" in broker.output
    # the broker registered the stock producer with the name server as the principal, with ACCESS_KEY:SECRET_KEY
    assert "cannot register in producer group" not in broker.output, broker.output[-3000:]
