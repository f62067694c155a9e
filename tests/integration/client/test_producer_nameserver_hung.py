"""A hung name server (SIGSTOP) does not slow a producer down: past the route TTL it keeps sending on the cached
route while the refresh waits in the background, and the route is renewed once the name server answers again."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from graymq.client import Message, Producer
from tests.support.clients import wait_until

pytestmark = pytest.mark.integration

TOPIC = "TOPIC_HUNG_NS"
TTL_S = 0.3
SENDS = 10
# Before, every send past the TTL waited for the name server (2 tries x 3 s): 10 sends took a minute.
DEADLINE_S = 30.0


def test_a_producer_keeps_sending_past_the_route_ttl_while_the_name_server_is_stopped(cluster) -> None:
    cluster.add_broker("broker-a")
    cluster.create_topic(TOPIC, 4, 0)
    nameserver = cluster.nameservers[0].proc

    async def scenario() -> None:
        producer = Producer("P_HUNG", cluster.ns_url, route_ttl_s=TTL_S)
        await producer.start()
        try:
            await producer.send(Message(TOPIC, b"before"))
            os.kill(nameserver.pid, signal.SIGSTOP)
            stopped = time.monotonic()
            completed = 0
            try:
                async with asyncio.timeout(DEADLINE_S):
                    for _ in range(SENDS):
                        await asyncio.sleep(TTL_S)  # every send finds the cached route due for a refresh
                        await producer.send(Message(TOPIC, b"while stopped"))
                        completed += 1
            except TimeoutError:
                pass
            finally:
                stopped_for = time.monotonic() - stopped
                os.kill(nameserver.pid, signal.SIGCONT)
                woken = time.monotonic()
            assert completed == SENDS
            assert producer.routes.age_s(TOPIC) >= stopped_for  # no refresh could succeed meanwhile
            await producer.send(Message(TOPIC, b"after"))
            await wait_until(lambda: producer.routes.age_s(TOPIC) < time.monotonic() - woken, 20,
                             "the route to be renewed")
        finally:
            await producer.stop()

    asyncio.run(scenario())
