"""A PushConsumer's receives on the gRPC endpoint without a network, on a real store and a clock the test moves:
``auto_renew`` without an invisible time, deliveries renewed while the client is there and acked by the handle it
received, renewals ending with the client or after their maximum time; and a receive whose queues are not known in
time answers before its deadline."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from graymq.broker_ext.groups.offset_manager import ConsumerOffsetManager
from graymq.broker_ext.grpc_endpoint.ack import AckService
from graymq.broker_ext.grpc_endpoint.credentials import Caller
from graymq.broker_ext.grpc_endpoint.receive import DEADLINE_MARGIN_S, ReceiveService
from graymq.broker_ext.grpc_endpoint.renewals import AutoRenewals
from graymq.broker_ext.grpc_endpoint.settings import EndpointLimits, GroupConsumption
from graymq.broker_ext.pop.receipt import ReceiptSigner
from graymq.broker_ext.pop.service import PopService
from graymq.broker_ext.processors.pull_hold import PullRequestHoldService
from graymq.broker_ext.security.principals import DEV_PRINCIPAL
from graymq.broker_ext.store import MessageStore, PutMessage, StoreConfig
from graymq.broker_ext.topic_config import TopicConfig
from graymq.protocol.record import make_properties
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from graymq.protocol.rocketmq_v2 import service_pb2 as v2s

pytestmark = pytest.mark.unit

CLIENT = "orders-v1@1@0@push"
CALLER = Caller(DEV_PRINCIPAL, None, CLIENT)
INVISIBLE_S = 30.0


async def every_queue(caller: Caller, group: str, topic: str) -> frozenset[int] | None:
    return None


class Endpoint:
    """The receive and ack services on one pop state, their clock moved by the test (``now``); ``present``: the
    clients with a telemetry stream open."""

    def __init__(self, root: Path, max_s: float = 3600.0) -> None:
        self.now = 0.0
        self.store = MessageStore(StoreConfig(store_dir=root / "store", segment_size=1 << 20, cq_units_per_file=64))
        self.store.load()
        self.store.put_messages([PutMessage("T", 0, b"m", make_properties(msg_id="m"))])
        self.pop = PopService(self.store, ConsumerOffsetManager(root), PullRequestHoldService(),
                              ReceiptSigner(b"k" * 32), lambda *a: None, lambda *a: None, clock=lambda: self.now)
        self.present = {CLIENT}
        self.renewals = AutoRenewals(self.pop, self.present.__contains__, max_s, clock=lambda: self.now)
        clients: Any = SimpleNamespace(clients={}, consumers=SimpleNamespace(
            consumption_of=lambda group: GroupConsumption()))
        self.receives = ReceiveService(self.pop, lambda topic: TopicConfig(topic, 1, 0), clients, every_queue,
                                       EndpointLimits(auto_renew_invisible_s=INVISIBLE_S), "broker-a", self.renewals)
        self.acks = AckService(self.pop, self.renewals)

    def receive(self, auto_renew: bool = True) -> list[v2.Message]:
        """One receive without a wait: the messages it delivered."""
        request = v2s.ReceiveMessageRequest(group=v2.Resource(name="G"), batch_size=8, auto_renew=auto_renew,
                                            message_queue=v2.MessageQueue(topic=v2.Resource(name="T")))
        request.long_polling_timeout.FromSeconds(0)

        async def run() -> list[v2.Message]:
            return [r.message async for r in self.receives.receive_message(request, CALLER, None)
                    if r.HasField("message")]
        return asyncio.run(run())

    def ack(self, handle: str) -> int:
        request = v2s.AckMessageRequest(group=v2.Resource(name="G"), topic=v2.Resource(name="T"),
                                        entries=[v2s.AckMessageEntry(message_id="m", receipt_handle=handle)])
        return asyncio.run(self.acks.ack_message(request, CALLER)).status.code

    def at(self, now: float) -> None:
        """Move the clock to ``now`` and renew what is due."""
        self.now = now
        self.renewals.renew_due()


@pytest.fixture
def endpoint(tmp_path: Path) -> Iterator[Endpoint]:
    e = Endpoint(tmp_path)
    yield e
    asyncio.run(e.store.stop())


def test_an_auto_renew_receive_without_an_invisible_time_gets_the_endpoints_own(endpoint: Endpoint) -> None:
    (message,) = endpoint.receive()
    assert message.system_properties.invisible_duration.ToMilliseconds() == INVISIBLE_S * 1000
    assert set(endpoint.renewals.renewals) == {message.system_properties.receipt_handle}


def test_a_delivery_is_renewed_while_its_client_is_there_and_acked_by_the_handle_it_received(
        endpoint: Endpoint) -> None:
    (message,) = endpoint.receive()
    for now in (16.0, 32.0, 48.0, 64.0):  # each time half of the last invisible time has passed
        endpoint.at(now)
    assert endpoint.renewals.renewed == 4
    endpoint.at(70.0)  # long past the first invisible time, within the last renewal's
    assert endpoint.receive() == []
    assert endpoint.ack(message.system_properties.receipt_handle) == v2.OK
    assert endpoint.renewals.renewals == {}
    endpoint.at(1000.0)
    assert endpoint.receive() == [] and endpoint.renewals.renewed == 4  # acked: never renewed nor delivered again


def test_renewals_stop_when_the_client_is_gone_and_the_message_comes_back_after_its_invisible_time(
        endpoint: Endpoint) -> None:
    (message,) = endpoint.receive()
    endpoint.at(16.0)  # renewed: invisible until 46
    endpoint.present.clear()  # its telemetry stream closed
    endpoint.at(32.0)  # due again: not renewed
    assert endpoint.renewals.renewed == 1
    endpoint.at(45.0)
    assert endpoint.receive() == []
    endpoint.at(47.0)
    (again,) = endpoint.receive()
    assert again.system_properties.delivery_attempt == 2
    assert endpoint.ack(message.system_properties.receipt_handle) == v2.INVALID_RECEIPT_HANDLE
    assert set(endpoint.renewals.renewals) == {again.system_properties.receipt_handle}  # the new delivery's alone


def test_after_renewals_stop_the_handle_the_client_received_still_acks_until_the_last_invisible_time_ends(
        endpoint: Endpoint) -> None:
    (message,) = endpoint.receive()
    endpoint.at(16.0)
    endpoint.present.clear()
    endpoint.at(32.0)  # not renewed: invisible until 46
    assert endpoint.ack(message.system_properties.receipt_handle) == v2.OK
    endpoint.at(60.0)
    assert endpoint.receive() == []


def test_renewals_stop_after_their_maximum_time_and_the_message_comes_back(tmp_path: Path) -> None:
    endpoint = Endpoint(tmp_path, max_s=60.0)
    try:
        endpoint.receive()
        for now in (16.0, 32.0, 48.0, 64.0):  # renewed three times, then past the maximum: invisible until 78
            endpoint.at(now)
        assert endpoint.renewals.renewed == 3
        endpoint.at(77.0)
        assert endpoint.receive() == []
        endpoint.at(79.0)
        (again,) = endpoint.receive()
        assert again.system_properties.delivery_attempt == 2
    finally:
        asyncio.run(endpoint.store.stop())


def test_a_receive_whose_queues_are_not_known_in_time_answers_empty_before_its_deadline(tmp_path: Path) -> None:
    """A first receive waits for its client's registration: a name server that does not answer must not hold the
    answer past the call's deadline, and the registration goes on."""
    store = MessageStore(StoreConfig(store_dir=tmp_path / "store", segment_size=1 << 20, cq_units_per_file=64))
    store.load()
    pop = PopService(store, ConsumerOffsetManager(tmp_path), PullRequestHoldService(), ReceiptSigner(b"k" * 32),
                     lambda *a: None, lambda *a: None)
    registered, finished = asyncio.Event(), []

    async def registering(caller: Caller, group: str, topic: str) -> frozenset[int] | None:
        await registered.wait()
        finished.append(caller.client_id)
        return None

    clients: Any = SimpleNamespace(clients={}, consumers=SimpleNamespace(consumption_of=lambda g: GroupConsumption()))
    service = ReceiveService(pop, lambda topic: TopicConfig(topic, 1, 0), clients, registering, EndpointLimits(),
                             "broker-a", AutoRenewals(pop, lambda client_id: True, 60.0))
    request = v2s.ReceiveMessageRequest(group=v2.Resource(name="G"), batch_size=8,
                                        message_queue=v2.MessageQueue(topic=v2.Resource(name="T")))
    request.invisible_duration.FromSeconds(10)
    request.long_polling_timeout.FromSeconds(20)  # the SDK's: its deadline is this plus its request timeout
    time_left_s = DEADLINE_MARGIN_S + 0.3

    async def run() -> list[int]:
        answer = await asyncio.wait_for(_codes(service, request, time_left_s), time_left_s)
        registered.set()
        for _ in range(10):
            await asyncio.sleep(0)
        return answer

    try:
        assert asyncio.run(run()) == [v2.MESSAGE_NOT_FOUND]
        assert finished == [CLIENT]
    finally:
        asyncio.run(store.stop())


async def _codes(service: ReceiveService, request: v2s.ReceiveMessageRequest, time_left_s: float) -> list[int]:
    return [r.status.code async for r in service.receive_message(request, CALLER, time_left_s)
            if r.HasField("status")]
