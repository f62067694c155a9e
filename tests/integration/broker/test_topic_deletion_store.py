"""A topic deleted in the name server loses its stored messages on the broker: a topic created again under the
same name starts empty, also after the broker was killed right after applying the deletion."""

from __future__ import annotations

import pytest

from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.broker_client import BrokerClient
from tests.support.broker import pull_request, run, send
from tests.support.cli import wait_for

pytestmark = pytest.mark.integration

QUEUES = 4


def stored(address: str, topic: str) -> tuple[list[int], list[int]]:
    """Per queue the max offset and how many records a fresh group pulls from the first offset."""

    async def go(client: BrokerClient) -> tuple[list[int], list[int]]:
        maxes, pulled = [], []
        for queue_id in range(QUEUES):
            maxes.append(await client.max_offset(address, topic, queue_id))
            response = await client.pull(address, pull_request("FRESH", "c1", topic, queue_id, 0, expression="*"))
            pulled.append(response.record_count if response.status == pb.FOUND else 0)
        return maxes, pulled

    return run(go)


def send_four(address: str, prefix: bytes) -> None:
    async def go(client: BrokerClient) -> None:
        for n in range(QUEUES):
            await send(client, address, "TD", n, prefix + b"-%d" % n)

    run(go)


def test_a_deleted_topic_created_again_serves_none_of_its_old_messages_even_after_a_kill(cluster) -> None:
    broker = cluster.add_broker("broker-a")
    cluster.create_topic("TD", QUEUES, 0)
    send_four(broker.address, b"first")
    cluster.ns_call(lambda ns: ns.delete_topic("TD"))
    wait_for(lambda: broker.output.count("topic TD deleted by the name server") == 1, 30, "the deletion applied")
    cluster.create_topic("TD", QUEUES, 0)
    assert stored(broker.address, "TD") == ([0] * QUEUES, [0] * QUEUES)

    send_four(broker.address, b"second")
    cluster.ns_call(lambda ns: ns.delete_topic("TD"))
    wait_for(lambda: broker.output.count("topic TD deleted by the name server") == 2, 30, "the deletion applied")
    broker.kill()  # SIGKILL: no checkpoint, no clean stop, recovery scans the commit log
    broker = cluster.add_broker("broker-a")
    assert "recovering the commit log" in broker.output
    cluster.create_topic("TD", QUEUES, 0)
    assert stored(broker.address, "TD") == ([0] * QUEUES, [0] * QUEUES)
