"""A stock producer's properties on the broker's gRPC endpoint: bounded as on the broker port, answered with
RocketMQ's own codes (MESSAGE_PROPERTIES_TOO_LARGE, ILLEGAL_MESSAGE_PROPERTY_KEY) naming the property and the limit,
and the reserved names the broker owns stripped before the message is stored."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from graymq.protocol.rocketmq_v2 import service_pb2 as v2s
from graymq.protocol.rocketmq_v2 import service_pb2_grpc
from tests.support.cluster import Cluster
from tests.support.stock_reads import stored_messages

pytestmark = pytest.mark.integration

TOPIC = "GRPC_PROPS"


def send(endpoint: str, body: str, user_properties: dict[str, str], keys: tuple[str, ...] = ()) -> v2.Status:
    async def call() -> v2s.SendMessageResponse:
        async with grpc.aio.insecure_channel(endpoint) as channel:
            system = v2.SystemProperties(message_id=f"01{body}", message_type=v2.NORMAL, keys=list(keys))
            message = v2.Message(topic=v2.Resource(name=TOPIC), body=body.encode(), system_properties=system,
                                 user_properties=user_properties)
            return await service_pb2_grpc.MessagingServiceStub(channel).SendMessage(
                v2s.SendMessageRequest(messages=[message]), timeout=10)

    return asyncio.run(call()).status


def test_stock_properties_over_a_limit_or_reserved_are_refused_with_rocketmq_codes_and_owned_names_stripped(
        grpc_cluster: Cluster, grpc_endpoint: str) -> None:
    grpc_cluster.create_topic(TOPIC, 4, 0)
    too_many = send(grpc_endpoint, "many", {f"p{i}": "v" * 1024 for i in range(3 * 1024)})
    assert too_many.code == v2.MESSAGE_PROPERTIES_TOO_LARGE and "more than the 128 allowed" in too_many.message
    big_key = send(grpc_endpoint, "key", {}, keys=("k" * (1 << 20),))
    assert big_key.code == v2.MESSAGE_PROPERTIES_TOO_LARGE and "message key of 1048576 bytes" in big_key.message
    total = send(grpc_endpoint, "total", {f"p{i}": "v" * 4000 for i in range(10)})
    assert total.code == v2.MESSAGE_PROPERTIES_TOO_LARGE and "more than the 32768 allowed" in total.message
    timed = send(grpc_endpoint, "timed", {"__STARTDELIVERTIME": "1"})
    assert timed.code == v2.ILLEGAL_MESSAGE_PROPERTY_KEY and "'__STARTDELIVERTIME' is reserved" in timed.message
    grouped = send(grpc_endpoint, "grouped", {"__SHARDINGKEY": "g1"})
    assert grouped.code == v2.ILLEGAL_MESSAGE_PROPERTY_KEY and "'__SHARDINGKEY' is reserved" in grouped.message
    assert send(grpc_endpoint, "ok", {"region": "eu", "RETRY_TOPIC": "ELSEWHERE"}).code == v2.OK
    (stored,) = stored_messages(grpc_cluster.ns_url, TOPIC, 4, 0, 1, timeout=10)
    assert stored.body == b"ok" and stored.properties["region"] == "eu" and "RETRY_TOPIC" not in stored.properties
