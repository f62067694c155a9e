"""A producer sending to a topic the moment it is created (without waiting for the brokers) never fails: a broker
that has not learned the topic yet is asked again within the send timeout."""

from __future__ import annotations

import asyncio

import pytest

from graymq.client import Message, Producer

pytestmark = pytest.mark.integration


def test_sends_right_after_a_topic_is_created_without_waiting_all_succeed(cluster) -> None:
    for name in ("broker-a", "broker-b"):
        cluster.add_broker(name, GRAYMQ_BROKER_REGISTER_INTERVAL_S="3")  # the default interval

    async def scenario() -> None:
        admin = cluster.admin()
        producer = Producer("P_NEW_TOPIC", cluster.ns_url)
        await producer.start()
        try:
            for i in range(5):
                topic = f"T_FRESH_{i}"
                await admin.put_topic(topic, 4, 0)  # no wait_s: the brokers may not know it yet
                results = await asyncio.gather(*(producer.send(Message(topic, b"x")) for _ in range(8)))
                assert len(results) == 8
        finally:
            await producer.stop()
            await admin.close()

    asyncio.run(scenario())
