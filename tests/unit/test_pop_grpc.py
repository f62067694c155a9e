"""The gRPC side of pop consumption without a network: a stored message as a stock consumer gets it, the
request's limits, the per-client bound on concurrent receives, and per-entry ack results."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from graymq.broker_ext.groups.offset_manager import ConsumerOffsetManager
from graymq.broker_ext.grpc_endpoint.ack import AckService
from graymq.broker_ext.grpc_endpoint.credentials import Caller
from graymq.broker_ext.grpc_endpoint.receive import (
    MAX_STREAMS_PER_CLIENT,
    ReceiveService,
    to_rocketmq_message,
)
from graymq.broker_ext.grpc_endpoint.renewals import AutoRenewals
from graymq.broker_ext.grpc_endpoint.settings import EndpointLimits, GroupConsumption
from graymq.broker_ext.grpc_endpoint.status import RocketMQStatusError
from graymq.broker_ext.pop.receipt import ReceiptSigner
from graymq.broker_ext.pop.service import Popped, PopRequest, PopService
from graymq.broker_ext.processors.pull_hold import PullRequestHoldService
from graymq.broker_ext.security.principals import DEV_PRINCIPAL
from graymq.broker_ext.store import MessageStore, PutMessage, StoreConfig
from graymq.broker_ext.topic_config import TopicConfig, lane_pairs
from graymq.protocol.errors import NotLeaderError
from graymq.protocol.record import MessageExt, make_properties
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from graymq.protocol.rocketmq_v2 import service_pb2 as v2s

pytestmark = pytest.mark.unit

CALLER = Caller(DEV_PRINCIPAL, None, "host@1@client")


def test_a_stored_message_keeps_its_parts_carries_an_md5_digest_and_leaves_graymqs_properties_out() -> None:
    properties = make_properties(tags="TagA", keys=["k1", "k2"], msg_id="ID-1", trace_id="t",
                                 extra={"region": "eu", "__SHARDINGKEY": "order-7", "PGROUP": "P"})
    stored = MessageExt("T", b"body", 3, 42, 999, properties, born_timestamp=1_000, store_timestamp=2_000,
                        born_host="10.0.0.1:5")
    message = to_rocketmq_message(Popped(stored, "handle", 2, 30_000), "broker-a")
    props = message.system_properties
    assert (props.tag, list(props.keys), props.message_id) == ("TagA", ["k1", "k2"], "ID-1")
    assert props.body_digest.type == v2.MD5 and props.body_digest.checksum == hashlib.md5(b"body").hexdigest().upper()
    assert (props.receipt_handle, props.delivery_attempt, props.queue_id, props.queue_offset) == ("handle", 2, 3, 42)
    assert props.message_group == "order-7" and props.message_type == v2.FIFO
    assert props.invisible_duration.ToMilliseconds() == 30_000 and props.born_timestamp.ToMilliseconds() == 1_000
    assert dict(message.user_properties) == {"region": "eu"}


@pytest.fixture
def pop(tmp_path: Path) -> Iterator[PopService]:
    store = MessageStore(StoreConfig(store_dir=tmp_path / "store", segment_size=1 << 20, cq_units_per_file=64))
    store.load()
    store.put_messages([PutMessage("T", 0, b"m", make_properties(msg_id="m"))])
    service = PopService(store, ConsumerOffsetManager(tmp_path), PullRequestHoldService(), ReceiptSigner(b"k" * 32),
                         lambda *a: None, lambda *a: None)
    yield service
    asyncio.run(store.stop())


async def every_queue(caller: Caller, group: str, topic: str) -> frozenset[int] | None:
    return None


def receives(pop: PopService) -> ReceiveService:
    # no telemetry stream, no name server: the group's defaults (not FIFO, 16 attempts)
    clients: Any = SimpleNamespace(clients={}, consumers=SimpleNamespace(consumption_of=lambda g: GroupConsumption()))
    return ReceiveService(pop, lambda topic: TopicConfig(topic, 2, 0) if topic == "T" else None, clients,
                          every_queue, EndpointLimits(), "broker-a", renewals(pop))


def acks(pop: PopService) -> AckService:
    return AckService(pop, renewals(pop))


def renewals(pop: PopService) -> AutoRenewals:
    return AutoRenewals(pop, lambda client_id: True, 60.0)


def request(invisible_s: float | None = 10, batch: int = 4) -> v2s.ReceiveMessageRequest:
    req = v2s.ReceiveMessageRequest(group=v2.Resource(name="G"), batch_size=batch,
                                    message_queue=v2.MessageQueue(topic=v2.Resource(name="T")))
    if invisible_s is not None:
        req.invisible_duration.FromMilliseconds(int(invisible_s * 1000))
    req.long_polling_timeout.FromSeconds(0)
    return req


async def answers(service: ReceiveService, req: v2s.ReceiveMessageRequest) -> list[v2s.ReceiveMessageResponse]:
    return [r async for r in service.receive_message(req, CALLER, None)]


def test_a_receive_streams_status_messages_then_delivery_time_and_an_empty_one_message_not_found(
        pop: PopService) -> None:
    service = receives(pop)
    first, again = asyncio.run(answers(service, request())), asyncio.run(answers(service, request()))
    assert [r.WhichOneof("content") for r in first] == ["status", "message", "delivery_timestamp"]
    assert first[0].status.code == v2.OK and first[1].message.body == b"m"
    assert [r.status.code for r in again] == [v2.MESSAGE_NOT_FOUND]


@pytest.mark.parametrize(("req", "code"), [(request(invisible_s=None), v2.ILLEGAL_INVISIBLE_TIME),
                                           (request(invisible_s=0.5), v2.ILLEGAL_INVISIBLE_TIME),
                                           (request(batch=0), v2.BAD_REQUEST)])
def test_a_bad_receive_is_refused_with_its_code(pop: PopService, req: v2s.ReceiveMessageRequest, code: int) -> None:
    with pytest.raises(RocketMQStatusError) as refused:
        asyncio.run(answers(receives(pop), req))
    assert refused.value.code == code


def test_receives_past_the_per_client_bound_are_refused_as_too_many(pop: PopService) -> None:
    service = receives(pop)
    service.streams[CALLER.client_id] = MAX_STREAMS_PER_CLIENT
    with pytest.raises(RocketMQStatusError) as refused:
        asyncio.run(answers(service, request()))
    assert refused.value.code == v2.TOO_MANY_REQUESTS


def test_an_ack_answers_each_entry_and_a_repeated_handle_is_stale(pop: PopService) -> None:
    async def run() -> v2s.AckMessageResponse:
        (popped,) = await pop.receive(PopRequest("G", "T", (0,), 4, 10_000))
        entry = v2s.AckMessageEntry(message_id="m", receipt_handle=popped.receipt_handle)
        return await acks(pop).ack_message(v2s.AckMessageRequest(
            group=v2.Resource(name="G"), topic=v2.Resource(name="T"),
            entries=[entry, entry, v2s.AckMessageEntry(message_id="x", receipt_handle="forged")]), CALLER)

    answer = asyncio.run(run())
    assert answer.status.code == v2.MULTIPLE_RESULTS
    assert [e.status.code for e in answer.entries] == [v2.OK, v2.INVALID_RECEIPT_HANDLE, v2.INVALID_RECEIPT_HANDLE]


def test_a_broker_that_may_not_change_consumption_state_refuses_receives_and_acks(pop: PopService) -> None:
    def not_leader() -> None:
        raise NotLeaderError("broker-a replica 1 does not lead")

    pop.fence = not_leader
    with pytest.raises(RocketMQStatusError) as refused:
        asyncio.run(answers(receives(pop), request()))
    assert refused.value.code == v2.HA_NOT_AVAILABLE
    answer = asyncio.run(acks(pop).ack_message(v2s.AckMessageRequest(
        group=v2.Resource(name="G"), topic=v2.Resource(name="T"),
        entries=[v2s.AckMessageEntry(message_id="m", receipt_handle="any")]), CALLER))
    assert [e.status.code for e in answer.entries] == [v2.HA_NOT_AVAILABLE]


def test_a_delivered_message_names_the_lane_of_its_queue_and_keeps_its_trace_context(tmp_path: Path) -> None:
    """What a stock relay copies onto its next send: ``graymq.lane`` is the lane of the queue the message came from
    (a stale mark on a base queue's message is left out), ``traceparent`` as it was sent."""
    store = MessageStore(StoreConfig(store_dir=tmp_path / "store", segment_size=1 << 20, cq_units_per_file=64))
    store.load()
    context = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    store.put_messages([PutMessage("T", 1, b"base", make_properties(msg_id="b", extra={**context,
                                                                                       "graymq.lane": "v2"})),
                        PutMessage("T", 6, b"v3", make_properties(msg_id="l", extra=context))])
    pop = PopService(store, ConsumerOffsetManager(tmp_path), PullRequestHoldService(), ReceiptSigner(b"k" * 32),
                     lambda *a: None, lambda *a: None)
    clients: Any = SimpleNamespace(clients={}, consumers=SimpleNamespace(consumption_of=lambda g: GroupConsumption()))
    config = TopicConfig("T", 10, 2, lane_slots=3, lanes={"v3": 1})  # slots: 0 is 0 5, 1 is 6 7, 2 is 8 9
    service = ReceiveService(pop, lambda topic: config, clients, every_queue, EndpointLimits(), "broker-a",
                             renewals(pop))
    try:
        delivered = [r.message for r in asyncio.run(answers(service, request())) if r.HasField("message")]
    finally:
        asyncio.run(store.stop())
    assert {m.body: dict(m.user_properties) for m in delivered} == {b"base": context,
                                                                   b"v3": {**context, "graymq.lane": "v3"}}


def test_a_delivery_names_the_lane_its_queue_had_when_the_receive_chose_its_queues(tmp_path: Path) -> None:
    """A lane map heard while a receive waits (here an older one, without v3's slot) does not relabel what the
    receive delivers: it was given queue 6 as v3's, and its message is v3's."""
    store = MessageStore(StoreConfig(store_dir=tmp_path / "store", segment_size=1 << 20, cq_units_per_file=64))
    store.load()
    store.put_messages([PutMessage("T", 6, b"v3", make_properties(msg_id="l"))])
    pop = PopService(store, ConsumerOffsetManager(tmp_path), PullRequestHoldService(), ReceiptSigner(b"k" * 32),
                     lambda *a: None, lambda *a: None)
    configs = [TopicConfig("T", 10, 2, lane_slots=3, lanes={"v3": 1})]

    async def receive(req: PopRequest) -> list[Popped]:
        configs.append(replace(configs[-1], lanes=lane_pairs({"v2": 0})))  # heard while the receive waits
        return await pop.receive(req)

    clients: Any = SimpleNamespace(clients={}, consumers=SimpleNamespace(consumption_of=lambda g: GroupConsumption()))
    service = ReceiveService(SimpleNamespace(receive=receive), lambda topic: configs[-1], clients,  # type: ignore[arg-type]
                             every_queue, EndpointLimits(), "broker-a", renewals(pop))
    try:
        delivered = [r.message for r in asyncio.run(answers(service, request())) if r.HasField("message")]
    finally:
        asyncio.run(store.stop())
    assert [dict(m.user_properties) for m in delivered] == [{"graymq.lane": "v3"}]
