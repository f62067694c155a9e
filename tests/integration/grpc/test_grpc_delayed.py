"""Delayed messages of the stock RocketMQ 5 Python SDK (``Message.delivery_timestamp``) through a broker's gRPC
endpoint: not readable before their time, stored on their real topic from then on, on the producer's side (a gray
producer's in the gray queues), across a broker restart while they wait; a delivery time RocketMQ refuses is
refused with ``ILLEGAL_DELIVERY_TIME``."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

import grpc
import pytest

from graymq.client import MessageExt
from graymq.core.queue_layout import gray_queue_ids
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from graymq.protocol.rocketmq_v2 import service_pb2 as v2s
from graymq.protocol.rocketmq_v2 import service_pb2_grpc
from tests.support.cluster import Cluster
from tests.support.stock_reads import stored_messages
from tests.support.stock_sdk import StockProducer

pytestmark = pytest.mark.integration

QUEUES, GRAY = 6, 2
GRAY_QUEUES = set(gray_queue_ids(QUEUES, GRAY))
DELAY_S = 4


def gray_topic(cluster: Cluster, topic: str) -> None:
    """``topic`` with gray queues, and a rule that makes this host's producers gray."""
    cluster.create_topic(topic, QUEUES, GRAY)
    cluster.ns_call(lambda ns: ns.set_switch(topic, True))
    cluster.ns_call(lambda ns: ns.add_rule(topic, {"host": socket.gethostname()}, True))


def endpoint(cluster: Cluster) -> str:
    """``broker-a``'s gRPC address now (a restarted broker listens on another port)."""
    info = cluster.brokers["broker-a"].ready_info
    assert info is not None
    return str(info["grpc"])


def send_delayed(cluster: Cluster, topic: str, body: str, home: Path) -> int:
    """Send ``body`` due ``DELAY_S`` from now with the SDK's Producer; its delivery timestamp (ms)."""
    producer = StockProducer(endpoint(cluster), topic, [{"body": body, "deliver_in_s": DELAY_S}], home)
    try:
        assert "client_id" in producer.next(), "the SDK's producer did not start"
        result = producer.next()
        assert "delivery_timestamp" in result, result
        return int(result["delivery_timestamp"])
    finally:
        producer.wait()


def stored_now(cluster: Cluster, topic: str) -> list[MessageExt]:
    return stored_messages(cluster.ns_url, topic, QUEUES, GRAY, 1, timeout=0)


def assert_delivered_once_on_the_gray_side(cluster: Cluster, topic: str, body: str, due_ms: int) -> None:
    stored = stored_messages(cluster.ns_url, topic, QUEUES, GRAY, 1, timeout=DELAY_S + 20)
    assert [m.body.decode() for m in stored] == [body]
    (message,) = stored
    assert message.store_timestamp >= due_ms, f"stored {due_ms - message.store_timestamp} ms before its time"
    assert message.queue_id in GRAY_QUEUES and message.gray
    print(f"delivered {message.store_timestamp - due_ms} ms after its delivery timestamp")


def test_a_delayed_message_is_not_readable_before_its_time_and_is_after_on_its_side(
        grpc_cluster: Cluster, tmp_path: Path) -> None:
    topic = "GRPC_DELAYED"
    gray_topic(grpc_cluster, topic)

    due_ms = send_delayed(grpc_cluster, topic, "later", tmp_path)

    while time.time() * 1000 < due_ms - 500:  # read again and again while it waits
        assert stored_now(grpc_cluster, topic) == []
        time.sleep(0.5)
    assert_delivered_once_on_the_gray_side(grpc_cluster, topic, "later", due_ms)


def test_a_delayed_message_waiting_through_a_broker_restart_is_delivered_once_due(
        grpc_cluster: Cluster, tmp_path: Path) -> None:
    topic = "GRPC_DELAYED_RESTART"
    gray_topic(grpc_cluster, topic)
    due_ms = send_delayed(grpc_cluster, topic, "after restart", tmp_path)
    assert stored_now(grpc_cluster, topic) == []

    grpc_cluster.restart_broker("broker-a", "--grpc-port", "0")

    assert_delivered_once_on_the_gray_side(grpc_cluster, topic, "after restart", due_ms)


def send_raw(address: str, properties: v2.SystemProperties) -> v2s.SendMessageResponse:
    async def call() -> v2s.SendMessageResponse:
        async with grpc.aio.insecure_channel(address) as channel:
            message = v2.Message(topic=v2.Resource(name="GRPC_DELAYED_REFUSED"), body=b"later",
                                 system_properties=properties)
            return await service_pb2_grpc.MessagingServiceStub(channel).SendMessage(
                v2s.SendMessageRequest(messages=[message]), timeout=10)

    return asyncio.run(call())


def test_a_delivery_time_rocketmq_refuses_is_refused_with_illegal_delivery_time(
        grpc_cluster: Cluster) -> None:
    grpc_cluster.create_topic("GRPC_DELAYED_REFUSED", QUEUES, GRAY)
    in_25_hours = int(time.time()) + 25 * 3600
    too_late = v2.SystemProperties(message_id="01TOOLATE", message_type=v2.DELAY, body_encoding=v2.IDENTITY)
    too_late.delivery_timestamp.seconds = in_25_hours
    fifo = v2.SystemProperties(message_id="01FIFO", message_type=v2.FIFO, body_encoding=v2.IDENTITY,
                               message_group="order-1")
    fifo.delivery_timestamp.seconds = int(time.time()) + 5

    refused_late = send_raw(endpoint(grpc_cluster), too_late)
    refused_fifo = send_raw(endpoint(grpc_cluster), fifo)

    assert refused_late.status.code == v2.ILLEGAL_DELIVERY_TIME and "86400 s allowed" in refused_late.status.message
    assert refused_fifo.status.code == v2.ILLEGAL_DELIVERY_TIME and "FIFO" in refused_fifo.status.message
