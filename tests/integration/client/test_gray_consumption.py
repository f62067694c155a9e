"""The seed's §4.3/§4.4 demo with real broker and name server processes and the client library."""

from __future__ import annotations

import asyncio

import pytest

from graymq.client import Message, Producer, PushConsumer
from graymq.core.message_queue import MessageQueue
from tests.support.clients import FAST, Recorder, consumer, run_scenario, wait_until

pytestmark = pytest.mark.integration
GROUP = "ORDER_GROUP"
TOPIC = "TOPIC_V_ORDER"


def v1_v2(recorder: Recorder, ns_url: str, subs_v1: dict[str, str], subs_v2: dict[str, str], v2_delay: float = 0.0):
    return [
        consumer(recorder, ns_url, GROUP, "v1a", subs_v1, labels={"version": "v1"}),
        consumer(recorder, ns_url, GROUP, "v1b", subs_v1, labels={"version": "v1"}),
        consumer(recorder, ns_url, GROUP, "v2a", subs_v2, labels={"version": "v2"}, delay_s=v2_delay),
        consumer(recorder, ns_url, GROUP, "v2b", subs_v2, labels={"version": "v2"}, delay_s=v2_delay),
    ]


async def settle(consumers, expected: dict[str, list[int]], timeout: float = 20.0) -> None:
    """Wait until each consumer holds exactly the expected queue ids of TOPIC."""

    def held() -> dict[str, list[int]]:
        return {c.client_id: sorted(mq.queue_id for mq in c.assigned() if mq.topic == TOPIC) for c in consumers}

    await wait_until(lambda: held() == expected, timeout, f"allocation {expected}, have {held()}")


def test_gray_sends_and_consumption_stay_on_their_queues_and_flip_drains(cluster):
    cluster.add_broker("broker-a")
    cluster.create_topic(TOPIC, 6, 2)
    cluster.ns_call(lambda ns: ns.add_rule(GROUP, {"version": "v2"}, True))
    ns_url = cluster.ns_url

    async def scenario() -> None:
        recorder = Recorder()
        consumers = v1_v2(recorder, ns_url, {TOPIC: "*"}, {TOPIC: "*"}, v2_delay=0.05)
        normal = Producer(GROUP, ns_url, labels={"version": "v1"}, heartbeat_interval_s=0.3)
        gray = Producer(GROUP, ns_url, labels={"version": "v2"}, heartbeat_interval_s=0.3)
        for c in consumers:
            await c.start()
        await normal.start()
        await gray.start()
        assert gray.gray and not normal.gray
        try:
            await settle(consumers, {"v1a": [1, 2], "v1b": [3, 4], "v2a": [0], "v2b": [5]})
            sent_gray = [await gray.send(Message(TOPIC, f"g{i}".encode())) for i in range(40)]
            sent_normal = [await normal.send(Message(TOPIC, f"n{i}".encode())) for i in range(40)]
            assert {r.queue.queue_id for r in sent_gray} == {0, 5}
            assert {r.queue.queue_id for r in sent_normal} == {1, 2, 3, 4}
            # flip v2 while most gray messages are still unconsumed (v2 handles one per 50 ms)
            for client_id in ("v2a", "v2b"):
                await cluster_admin_set_flag(ns_url, client_id, False)
            await wait_until(lambda: not any(c.gray for c in consumers), 30, "v2 to drain and flip")
            flip_at = max(e.at for e in recorder.events if e.client_id.startswith("v2") and e.gray)
            gray_ids = {r.msg_id for r in sent_gray}
            by_client = recorder.by_client()
            v2_consumed = {e.msg_id for c in ("v2a", "v2b") for e in by_client.get(c, []) if e.at <= flip_at}
            assert gray_ids <= v2_consumed, "every gray message is consumed by v2 before the flip"
            assert not any(e.gray for c in ("v1a", "v1b") for e in by_client.get(c, []))
            assert all(e.queue_id in (0, 5) for c in ("v2a", "v2b") for e in by_client[c] if e.at <= flip_at)
            # after the flip v2 joins the four middle queues; the gray queues are left alone
            await settle(consumers, {"v1a": [1], "v1b": [2], "v2a": [3], "v2b": [4]})
            more = [await normal.send(Message(TOPIC, f"after{i}".encode())) for i in range(40)]
            everything = gray_ids | {r.msg_id for r in sent_normal} | {r.msg_id for r in more}
            await wait_until(lambda: everything <= recorder.msg_ids(), 20, "every message consumed")
            late = {e.client_id for e in recorder.events if e.msg_id in {r.msg_id for r in more}}
            assert {"v2a", "v2b"} & late, "v2 consumes normal messages after the flip"
        finally:
            for c in consumers:
                await c.stop()
            await normal.stop()
            await gray.stop()

    run_scenario(scenario, 60)


async def cluster_admin_set_flag(ns_url: str, client_id: str, gray: bool) -> None:
    from graymq.nameserver_api.client import NameServerClient

    ns = NameServerClient(ns_url, admin_token="dev-token")
    try:
        await ns.set_flag(GROUP, client_id, gray, "test flip")
    finally:
        await ns.close()


def test_topic_across_two_brokers_each_with_gray_queues(cluster):
    cluster.add_broker("broker-a")
    cluster.add_broker("broker-b")
    cluster.create_topic(TOPIC, 6, 2)
    cluster.ns_call(lambda ns: ns.add_rule(GROUP, {"version": "v2"}, True))
    ns_url = cluster.ns_url

    async def scenario() -> None:
        recorder = Recorder()
        consumers = v1_v2(recorder, ns_url, {TOPIC: "*"}, {TOPIC: "*"})
        normal = Producer(GROUP, ns_url, labels={"version": "v1"})
        gray = Producer(GROUP, ns_url, labels={"version": "v2"})
        for c in consumers + []:
            await c.start()
        await normal.start()
        await gray.start()
        try:
            def held():
                return {c.client_id: sorted((mq.broker_name, mq.queue_id) for mq in c.assigned()
                                            if mq.topic == TOPIC) for c in consumers}

            expected = {"v2a": [("broker-a", 0), ("broker-a", 5)], "v2b": [("broker-b", 0), ("broker-b", 5)],
                        "v1a": [("broker-a", q) for q in (1, 2, 3, 4)],
                        "v1b": [("broker-b", q) for q in (1, 2, 3, 4)]}
            await wait_until(lambda: held() == expected, 20, f"allocation over two brokers, have {held()}")
            sent_gray = [await gray.send(Message(TOPIC, b"g")) for _ in range(24)]
            sent_normal = [await normal.send(Message(TOPIC, b"n")) for _ in range(24)]
            assert {(r.queue.broker_name, r.queue.queue_id) for r in sent_gray} == {
                (b, q) for b in ("broker-a", "broker-b") for q in (0, 5)}
            assert {r.queue.broker_name for r in sent_normal} == {"broker-a", "broker-b"}
            all_ids = {r.msg_id for r in sent_gray + sent_normal}
            await wait_until(lambda: all_ids <= recorder.msg_ids(), 20, "all consumed")
            gray_ids = {r.msg_id for r in sent_gray}
            for e in recorder.events:
                assert (e.msg_id in gray_ids) == e.client_id.startswith("v2")
            await cluster_admin_set_flag(ns_url, "v2a", False)
            await cluster_admin_set_flag(ns_url, "v2b", False)
            await wait_until(lambda: not any(c.gray for c in consumers), 20, "flip across brokers")
            await wait_until(lambda: all(mq.queue_id not in (0, 5) for c in consumers for mq in c.assigned()
                                         if mq.topic == TOPIC), 20, "gray queues released")
        finally:
            for c in consumers:
                await c.stop()
            await normal.stop()
            await gray.stop()

    run_scenario(scenario, 60)


def topic_queues(consumer: PushConsumer) -> list[MessageQueue]:
    """The queues of TOPIC the consumer holds (its retry topic's come once the broker made it: left out)."""
    return [q for q in consumer.assigned() if q.topic == TOPIC]


def test_consumption_continues_while_the_name_server_is_down(cluster):
    cluster.add_broker("broker-a")
    cluster.create_topic(TOPIC, 4, 0)
    ns_url = cluster.ns_url

    async def scenario() -> None:
        recorder = Recorder()
        c = consumer(recorder, ns_url, GROUP, "solo", {TOPIC: "*"})
        producer = Producer("P", ns_url)
        await c.start()
        await producer.start()
        try:
            await wait_until(lambda: len(topic_queues(c)) == 4, 20, "allocation")
            first = [await producer.send(Message(TOPIC, b"before")) for _ in range(10)]
            await wait_until(lambda: {r.msg_id for r in first} <= recorder.msg_ids(), 20, "consumed")
            cluster.nameservers[0].terminate()
            await asyncio.sleep(FAST["rebalance_interval_s"] * 2)  # rebalances run against the dead name server
            second = [await producer.send(Message(TOPIC, b"during")) for _ in range(10)]
            await wait_until(lambda: {r.msg_id for r in second} <= recorder.msg_ids(), 20,
                             "consumed with the name server down")
            assert len(topic_queues(c)) == 4  # the group's retry topic's queues may have come meanwhile: not counted
        finally:
            await c.stop()
            await producer.stop()

    run_scenario(scenario, 60)
