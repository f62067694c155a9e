"""Chaos: kill -9 of the broker while stock (RocketMQ 5 gRPC) pop consumers have messages in flight and acks under
way. Expected after the restart: no message whose ack was answered OK comes again (acks are durable before they
are answered), every message not acked comes again, nothing is lost. An ack sent and not answered when the broker
died may have been made durable or not: such a message may come again or not, and is counted apart.
"""

from __future__ import annotations

import asyncio
import signal
import time
from dataclasses import dataclass, field

import grpc
import pytest

from graymq.client import Message, Producer
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from graymq.protocol.rocketmq_v2 import service_pb2 as v2s
from graymq.protocol.rocketmq_v2 import service_pb2_grpc
from tests.chaos import faults
from tests.support.cluster import Cluster

pytestmark = [pytest.mark.chaos, pytest.mark.e2e, pytest.mark.timeout(240)]

TOPIC, GROUP, BROKER = "TOPIC_POP_CHAOS", "GID_POP_CHAOS", "broker-a"
QUEUES, MESSAGES = 4, 400
KILL_AFTER = 200  # received before the kill
BROKER_ARGS = ("--grpc-port", "0", "--flush", "sync")


@dataclass
class Ledger:
    """What the consumer saw: bodies received (each delivery), acks answered OK, acks unanswered at the kill."""

    received: list[str] = field(default_factory=list)
    acked: set[str] = field(default_factory=set)
    unanswered: set[str] = field(default_factory=set)


def receive_request() -> v2s.ReceiveMessageRequest:
    request = v2s.ReceiveMessageRequest(group=v2.Resource(name=GROUP), batch_size=16,
                                        message_queue=v2.MessageQueue(topic=v2.Resource(name=TOPIC)))
    request.invisible_duration.FromSeconds(60)  # longer than the case: only a restart brings one back
    request.long_polling_timeout.FromSeconds(1)
    return request


async def consume(endpoint: str, ledger: Ledger, *, ack_every: int, until: int, idle_rounds: int = 3) -> None:
    """Receive and ack every ``ack_every``-th message until ``until`` were received, the broker is gone, or
    ``idle_rounds`` long polls in a row found nothing."""
    idle = 0
    async with grpc.aio.insecure_channel(endpoint) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        while len(ledger.received) < until and idle < idle_rounds:
            try:
                responses = [r async for r in stub.ReceiveMessage(receive_request(), timeout=10)]
            except grpc.aio.AioRpcError:
                return  # the broker died
            idle = 0 if any(r.HasField("message") for r in responses) else idle + 1
            for response in responses:
                if not response.HasField("message"):
                    continue
                body = response.message.body.decode()
                ledger.received.append(body)
                if len(ledger.received) % ack_every:
                    continue
                ack = v2s.AckMessageRequest(group=v2.Resource(name=GROUP), topic=v2.Resource(name=TOPIC), entries=[
                    v2s.AckMessageEntry(message_id=body,
                                        receipt_handle=response.message.system_properties.receipt_handle)])
                ledger.unanswered.add(body)
                try:
                    answer = await stub.AckMessage(ack, timeout=10)
                except grpc.aio.AioRpcError:
                    return
                ledger.unanswered.discard(body)
                if answer.status.code == v2.OK:
                    ledger.acked.add(body)


async def produce(ns_url: str) -> None:
    producer = Producer("GID_POP_CHAOS_PRODUCER", ns_url)
    await producer.start()
    try:
        for i in range(MESSAGES):
            await producer.send(Message(TOPIC, f"m-{i}".encode()))
    finally:
        await producer.stop()


def grpc_endpoint(cluster: Cluster) -> str:
    info = cluster.brokers[BROKER].ready_info
    assert info is not None
    return str(info["grpc"])


@pytest.mark.parametrize("case", ["pop_kill9/sync"])
def test_kill9_with_pop_messages_in_flight_loses_no_ack_and_no_message(cluster: Cluster, case: str) -> None:
    cluster.add_broker(BROKER, *BROKER_ARGS)
    cluster.create_topic(TOPIC, QUEUES, 0)
    asyncio.run(produce(cluster.ns_url))
    before = Ledger()

    async def until_killed() -> float:
        consumer = asyncio.create_task(consume(grpc_endpoint(cluster), before, ack_every=2, until=MESSAGES))
        while len(before.received) < KILL_AFTER:
            await asyncio.sleep(0.01)
        broker = cluster.brokers[BROKER]
        faults.signal_pid(broker.proc.pid, signal.SIGKILL)
        await asyncio.to_thread(faults.wait_exit, broker.proc, 30)
        killed_at = time.monotonic()
        await asyncio.wait_for(consumer, 30)
        return killed_at

    killed_at = asyncio.run(until_killed())
    cluster.brokers[BROKER].kill()
    cluster.add_broker(BROKER, *BROKER_ARGS)
    recovered_s = time.monotonic() - killed_at
    after = Ledger()
    asyncio.run(asyncio.wait_for(consume(grpc_endpoint(cluster), after, ack_every=1, until=MESSAGES), 120))

    every = {f"m-{i}" for i in range(MESSAGES)}
    acked_again = before.acked & set(after.received)
    lost = every - before.acked - before.unanswered - set(after.received)
    in_flight = set(before.received) - before.acked - before.unanswered
    print(f"\n{case}: {len(before.received)} received before the kill, {len(before.acked)} acked, {len(in_flight)} in "
          f"flight, {len(before.unanswered)} acks unanswered; after restart ({recovered_s:.1f} s) "
          f"{len(after.received)} received: {len(acked_again)} acked ones again, "
          f"{len(in_flight & set(after.received))} in-flight ones again, {len(lost)} lost")
    assert len(before.received) >= KILL_AFTER and before.acked
    assert not acked_again, sorted(acked_again)
    assert in_flight <= set(after.received), sorted(in_flight - set(after.received))
    assert not lost, sorted(lost)
    assert len(after.received) == len(set(after.received))  # each once: all acked at once after the restart
