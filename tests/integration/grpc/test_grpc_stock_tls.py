"""A broker with ``--tls-cert/--tls-key`` serves its gRPC endpoint over TLS only: the stock SDK trusting the CA
sends; a plaintext client gets no answer but a transport error."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from graymq.devkit.certs import make_tls_files
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from graymq.protocol.rocketmq_v2 import service_pb2 as v2s
from graymq.protocol.rocketmq_v2 import service_pb2_grpc
from tests.support.cluster import Cluster
from tests.support.stock_sdk import sdk_send

pytestmark = pytest.mark.integration

TOPIC = "GRPC_TLS"


def test_the_grpc_endpoint_speaks_tls_with_the_brokers_certificate(cluster: Cluster, tmp_path: Path) -> None:
    tls = make_tls_files(tmp_path / "tls")
    broker = cluster.add_broker("broker-a", "--grpc-port", "0", "--tls-cert", str(tls.cert), "--tls-key",
                                str(tls.key), GRAYMQ_TLS_CA=str(tls.ca))
    cluster.create_topic(TOPIC, 4, 2)
    assert broker.ready_info is not None
    endpoint = str(broker.ready_info["grpc"])

    sent = sdk_send(endpoint, TOPIC, [{"body": "secret-1"}, {"body": "secret-2"}], tmp_path, tls_ca=tls.ca)
    assert all("message_id" in r for r in sent), sent

    async def plaintext() -> grpc.StatusCode:
        async with grpc.aio.insecure_channel(endpoint) as channel:
            try:
                await service_pb2_grpc.MessagingServiceStub(channel).QueryRoute(
                    v2s.QueryRouteRequest(topic=v2.Resource(name=TOPIC)), timeout=10)
            except grpc.aio.AioRpcError as error:
                return error.code()
        raise AssertionError("a plaintext call was answered by a TLS-only endpoint")

    assert asyncio.run(plaintext()) == grpc.StatusCode.UNAVAILABLE
