"""A stock simple consumer's long polls answer before the SDK's deadline.

The Python SDK gives a receive its request timeout plus its long polling timeout (``await_duration``) as the gRPC
deadline; the broker's answer must leave before it, whatever held the receive up before its wait. A receive that
registers its client in the name server (its first, or one after the broker forgot the client) waits for the name
server's answer: with the name server hung (SIGSTOP) that wait lasts a heartbeat's timeout (3 s), longer than the
SDK's request timeout here (2 s). Every receive on the empty topic must still be an empty answer, never
``DEADLINE_EXCEEDED``."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import grpc
import pytest

from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from graymq.protocol.rocketmq_v2 import service_pb2 as v2s
from graymq.protocol.rocketmq_v2 import service_pb2_grpc
from tests.support.cluster import Cluster
from tests.support.stock_sdk import StockSimpleConsumer, sdk_log

pytestmark = pytest.mark.integration

AWAIT_S, REQUEST_TIMEOUT_S = 2, 2  # the SDK's deadline for a receive: 4 s
RECEIVE_FAILED = "receive message exception"  # what the SDK logs when a receive fails


def forget_client(endpoint: str, client_id: str, group: str) -> None:
    """NotifyClientTermination in the client's name: the broker forgets its registrations, and registers it again at
    its next receive (as after its telemetry stream was reopened)."""
    with grpc.insecure_channel(endpoint) as channel:
        answer = service_pb2_grpc.MessagingServiceStub(channel).NotifyClientTermination(
            v2s.NotifyClientTerminationRequest(group=v2.Resource(name=group)),
            metadata=(("x-mq-client-id", client_id),), timeout=10)
    assert answer.status.code == v2.OK, answer.status


def test_receives_answer_empty_before_the_sdks_deadline_while_a_registration_waits_for_a_hung_name_server(
        grpc_cluster: Cluster, grpc_endpoint: str, tmp_path: Path) -> None:
    topic, group = "DEADLINE_EMPTY", "GID_DEADLINE"
    grpc_cluster.create_topic(topic, 4, 0)
    consumer = StockSimpleConsumer(grpc_endpoint, group, topic, tmp_path, await_s=AWAIT_S,
                                   request_timeout_s=REQUEST_TIMEOUT_S)
    nameserver = grpc_cluster.nameservers[0].proc
    answers = []
    try:
        command = {"receive": 32, "invisible": 10}
        answers += [consumer.call(command) for _ in range(2)]
        forget_client(grpc_endpoint, str(consumer.started["client_id"]), group)
        os.kill(nameserver.pid, signal.SIGSTOP)
        try:
            answers += [consumer.call(command) for _ in range(3)]  # the first registers the client again
        finally:
            os.kill(nameserver.pid, signal.SIGCONT)
        answers.append(consumer.call(command))
    finally:
        consumer.close()
    assert answers == [{"messages": []}] * 6
    assert RECEIVE_FAILED not in sdk_log(tmp_path)
