"""Client behaviours on real processes: flips both ways, drain timeout, gray propagation, retries, failover."""

from __future__ import annotations

import asyncio

import pytest

from graymq.client import ConsumeStatus, Message, MessageExt, Producer, PushConsumer
from graymq.client.context import current_message
from graymq.client.sync import SyncProducer
from graymq.protocol.errors import DrainTimeoutError
from tests.support.clients import FAST, Recorder, consumer, run_scenario, wait_until

pytestmark = pytest.mark.integration
GROUP = "GID_BEHAVIOUR"
TOPIC = "TOPIC_B"


def setup(cluster, *brokers: str, **env: str) -> str:
    for name in brokers or ("broker-a",):
        cluster.add_broker(name, **env)
    cluster.create_topic(TOPIC, 6, 2)
    return cluster.ns_url


async def set_flag(ns_url: str, client_id: str, gray: bool) -> None:
    from graymq.nameserver_api.client import NameServerClient

    ns = NameServerClient(ns_url, admin_token="dev-token")
    try:
        await ns.set_flag(GROUP, client_id, gray, "test")
    finally:
        await ns.close()


def test_normal_to_gray_flips_at_once_and_hands_normal_queues_over(cluster):
    ns_url = setup(cluster)

    async def scenario() -> None:
        recorder = Recorder()
        a = consumer(recorder, ns_url, GROUP, "a", {TOPIC: "*"})
        b = consumer(recorder, ns_url, GROUP, "b", {TOPIC: "*"})
        producer = Producer("P", ns_url)
        for c in (a, b):
            await c.start()
        await producer.start()
        try:
            def topic_queues(c: PushConsumer) -> list[int]:
                return sorted(mq.queue_id for mq in c.assigned() if mq.topic == TOPIC)

            await wait_until(lambda: len(topic_queues(a) + topic_queues(b)) == 4, 20, "allocation")
            await set_flag(ns_url, "a", True)
            await wait_until(lambda: a.gray and a.state == "GRAY", 10, "a to become gray without draining")
            await wait_until(lambda: topic_queues(a) == [0, 5] and topic_queues(b) == [1, 2, 3, 4], 20,
                             "a on the gray queues, b on every normal queue")
            sent = [await producer.send(Message(TOPIC, b"n", gray=False)) for _ in range(20)]
            await wait_until(lambda: {r.msg_id for r in sent} <= recorder.msg_ids(), 20, "normal messages")
            assert {e.client_id for e in recorder.events} == {"b"}
        finally:
            for c in (a, b):
                await c.stop()
            await producer.stop()

    run_scenario(scenario, 90)


def test_drain_timeout_leaves_the_client_gray_and_says_why(cluster):
    ns_url = setup(cluster)

    async def scenario() -> None:
        recorder = Recorder()
        # 40 messages at 0.3 s each on at most 8 threads need 1.5 s from the moment the queues are taken,
        # whatever the machine's speed: a 0.5 s drain cannot finish.
        slow = consumer(recorder, ns_url, GROUP, "slow", {TOPIC: "*"}, gray=True, delay_s=0.3, max_threads=8)
        producer = Producer("P", ns_url)
        await producer.start()
        sent = [await producer.send(Message(TOPIC, b"g", gray=True)) for _ in range(40)]
        await slow.start()
        try:
            await wait_until(lambda: len([q for q in slow.assigned() if q.topic == TOPIC]) == 2, 20, "gray queues")
            with pytest.raises(DrainTimeoutError, match="gray messages left"):
                await slow.drain_and_flip(timeout_s=0.5)
            assert slow.gray and slow.state == "GRAY" and "drain timed out" in slow.last_drain_error
            await slow.drain_and_flip(timeout_s=30)  # given time, it drains everything and flips
            assert not slow.gray and {r.msg_id for r in sent} <= recorder.msg_ids()
        finally:
            await slow.stop()
            await producer.stop()

    run_scenario(scenario, 90)


def test_sends_while_handling_a_gray_message_are_gray_and_keep_the_trace(cluster):
    ns_url = setup(cluster)
    cluster.create_topic("TOPIC_OUT", 6, 2)

    async def scenario() -> None:
        forwarder = Producer("P-forward", ns_url)
        await forwarder.start()
        forwarded = []

        async def forward(messages: list[MessageExt]) -> ConsumeStatus:
            for m in messages:
                assert current_message() is m
                forwarded.append((m, await forwarder.send(Message("TOPIC_OUT", m.body))))
            return ConsumeStatus.CONSUME_SUCCESS

        gray_consumer = PushConsumer(GROUP, ns_url, listener=forward, client_id="fwd", gray=True,
                                     consume_from="first", **FAST)  # type: ignore[arg-type]
        gray_consumer.subscribe(TOPIC)
        producer = Producer("P", ns_url)
        await gray_consumer.start()
        await producer.start()
        try:
            await producer.send(Message(TOPIC, b"hello", gray=True, trace_id="trace-1"))
            await wait_until(lambda: len(forwarded) == 1, 20, "the forward")
            original, result = forwarded[0]
            assert not forwarder.gray and result.gray and result.queue.queue_id in (0, 5)
            recorder = Recorder()
            reader = consumer(recorder, ns_url, "GID_READER", "reader", {"TOPIC_OUT": "*"}, gray=True)
            await reader.start()
            await wait_until(lambda: len(recorder.events) == 1, 20, "the forwarded message")
            await reader.stop()
            assert original.trace_id == "trace-1"
        finally:
            await gray_consumer.stop()
            await producer.stop()
            await forwarder.stop()

    run_scenario(scenario, 90)


def test_gray_retries_stay_on_the_gray_side(cluster):
    ns_url = setup(cluster, GRAYMQ_BROKER_DELAY_LEVELS_S="0.1,0.1,0.1,0.1,0.1")

    async def scenario() -> None:
        attempts: list[MessageExt] = []

        async def flaky(messages: list[MessageExt]) -> ConsumeStatus:
            attempts.extend(messages)
            return ConsumeStatus.RECONSUME_LATER if len(attempts) == 1 else ConsumeStatus.CONSUME_SUCCESS

        gray = PushConsumer(GROUP, ns_url, listener=flaky, client_id="gray", gray=True, consume_from="first", **FAST)
        normal_recorder = Recorder()
        normal = consumer(normal_recorder, ns_url, GROUP, "normal", {TOPIC: "*"})
        gray.subscribe(TOPIC)
        producer = Producer("P", ns_url)
        for c in (gray, normal):
            await c.start()
        await producer.start()
        try:
            sent = await producer.send(Message(TOPIC, b"retry me", gray=True))
            await wait_until(lambda: len(attempts) == 2, 30, "the retry to come back to the gray consumer")
            first, second = attempts
            assert first.msg_id == second.msg_id == sent.msg_id
            assert second.topic == f"%RETRY%{GROUP}" and second.queue_id in (0, 3) and second.reconsume_times == 1
            assert second.gray and not normal_recorder.events
        finally:
            for c in (gray, normal):
                await c.stop()
            await producer.stop()

    run_scenario(scenario, 90)


def test_producer_retries_on_another_broker_when_one_dies(cluster):
    ns_url = setup(cluster, "broker-a", "broker-b")

    async def scenario() -> None:
        producer = Producer("P", ns_url, retry_times=2)
        await producer.start()
        try:
            first = [await producer.send(Message(TOPIC, b"x")) for _ in range(8)]
            assert {r.queue.broker_name for r in first} == {"broker-a", "broker-b"}
            cluster.brokers["broker-a"].kill()
            after = [await producer.send(Message(TOPIC, b"y")) for _ in range(8)]
            assert {r.queue.broker_name for r in after} == {"broker-b"}
        finally:
            await producer.stop()

    run_scenario(scenario, 90)


def test_broadcasting_and_the_sync_facade(cluster, tmp_path):
    ns_url = setup(cluster)

    async def scenario() -> None:
        recorder = Recorder()
        listeners = [consumer(recorder, ns_url, "GID_BC", f"bc{i}", {TOPIC: "*"}, broadcasting=True,
                              offset_dir=tmp_path) for i in range(2)]
        for c in listeners:
            await c.start()
        try:
            await wait_until(lambda: all(len([q for q in c.assigned() if q.topic == TOPIC]) == 4 for c in listeners),
                             20, "every normal queue at every broadcasting client")
            producer = await asyncio.to_thread(SyncProducer, "P", ns_url)
            await asyncio.to_thread(producer.start)
            results = [await asyncio.to_thread(producer.send, Message(TOPIC, b"bc")) for _ in range(5)]
            await asyncio.to_thread(producer.stop)
            ids = {r.msg_id for r in results}
            await wait_until(lambda: len(recorder.events) == 10, 20, "each client to get every message")
            for client_id in ("bc0", "bc1"):
                assert {e.msg_id for e in recorder.events if e.client_id == client_id} == ids
        finally:
            for c in listeners:
                await c.stop()
        assert (tmp_path / "GID_BC" / "bc0.json").exists()  # broadcasting offsets are local

    run_scenario(scenario, 90)


def test_orderly_consumer_keeps_order_per_queue_and_retries_in_place(cluster):
    ns_url = setup(cluster)

    async def scenario() -> None:
        seen: list[bytes] = []
        failed_once: set[bytes] = set()

        async def ordered(messages: list[MessageExt]) -> ConsumeStatus:
            body = messages[0].body
            if body.endswith(b"7") and body not in failed_once:
                failed_once.add(body)
                return ConsumeStatus.RECONSUME_LATER  # retried in place, not sent back
            seen.append(body)
            return ConsumeStatus.CONSUME_SUCCESS

        c = PushConsumer(GROUP, ns_url, listener=ordered, client_id="orderly", orderly=True, consume_from="first",
                         **FAST)  # type: ignore[arg-type]
        c.subscribe(TOPIC)
        producer = Producer("P", ns_url)
        await c.start()
        await producer.start()
        try:
            results = [await producer.send(Message(TOPIC, f"{i:02d}".encode(), sharding_key="order-1"))
                       for i in range(30)]
            assert len({r.queue for r in results}) == 1
            await wait_until(lambda: len(seen) == 30, 30, "all ordered messages")
            assert seen == [f"{i:02d}".encode() for i in range(30)]
            assert failed_once == {b"07", b"17", b"27"}
        finally:
            await c.stop()
            await producer.stop()

    run_scenario(scenario, 90)
