"""Each source of gray against each state of its producer group, on a real name server and broker: the side a send
takes and reports (core/gray_side.py; README "Which side a send takes")."""

from __future__ import annotations

import pytest

from graymq.client import Message, Producer
from graymq.client.context import handling
from graymq.protocol.record import SYS_FLAG_GRAY, MessageExt
from tests.support.clients import run_scenario, wait_until

pytestmark = pytest.mark.integration
TOPIC = "TOPIC_SOURCES"
GROUP = "GID_SOURCES"
GRAY_QUEUES = {0, 3}  # 4 queues, 2 gray


async def sides(producer: Producer) -> dict[str, bool]:
    """The side each source of gray takes now (asserting the result's mark is the side of the queue it went to)."""
    handled = MessageExt("UPSTREAM", b"", 0, 0, 0, sys_flag=SYS_FLAG_GRAY)  # a gray message being handled
    results = {"flag": await producer.send(Message(TOPIC, b"f")),
               "explicit": await producer.send(Message(TOPIC, b"e", gray=True))}
    with handling(handled):
        results["propagated"] = await producer.send(Message(TOPIC, b"p"))
    for r in results.values():  # switch off: every queue is normal
        assert r.gray == (producer.gray_switch and r.queue.queue_id in GRAY_QUEUES), r
    return {source: r.gray for source, r in results.items()}


def test_each_source_of_gray_in_each_state_of_the_producer_group(cluster) -> None:
    cluster.add_broker("broker-a")
    cluster.create_topic(TOPIC, 4, 2)
    ns = cluster.ns_url

    async def scenario() -> None:
        admin = cluster.admin()
        marking = Producer(GROUP, ns, client_id="marking", heartbeat_interval_s=0.3)
        flagged = Producer(GROUP, ns, client_id="flagged", gray=True, heartbeat_interval_s=0.3)
        await marking.start()
        await flagged.start()
        try:
            # release: switch on, nothing running: every source is honoured
            assert await sides(marking) == {"flag": False, "explicit": True, "propagated": True}
            assert await sides(flagged) == {"flag": True, "explicit": True, "propagated": True}
            # a promote covering the producer group runs: marks refused at once, the flag until flipped
            op = await admin.start_cutover(GROUP, "promote", "drain", [GROUP])
            await wait_until(lambda: not marking.gray_marks and not flagged.gray_marks, 10, "marks refused")
            assert await sides(marking) == {"flag": False, "explicit": False, "propagated": False}
            assert await sides(flagged) == {"flag": True, "explicit": True, "propagated": True}
            await admin.set_flag(GROUP, "flagged", False, "test", operation_id=op.id)
            await admin.set_flag(GROUP, "marking", False, "test", operation_id=op.id)
            await wait_until(lambda: not flagged.gray, 10, "flagged flipped normal")
            assert await sides(flagged) == {"flag": False, "explicit": False, "propagated": False}
            # released: the flipped producers stay normal for every message; a new one opens the next release
            await admin.update_cutover(op.id, state="SUCCEEDED", step="done")
            await marking.membership.beat()
            assert await sides(marking) == {"flag": False, "explicit": False, "propagated": False}
            newcomer = Producer(GROUP, ns, client_id="newcomer", heartbeat_interval_s=0.3)
            await newcomer.start()
            try:
                assert await sides(newcomer) == {"flag": False, "explicit": True, "propagated": True}
                # switch off: every queue is normal, nothing is sent gray
                await admin.set_switch(GROUP, False, "test")
                await wait_until(lambda: not newcomer.gray_switch, 10, "switch off applied")
                assert await sides(newcomer) == {"flag": False, "explicit": False, "propagated": False}
            finally:
                await newcomer.stop()
        finally:
            await marking.stop()
            await flagged.stop()
            await admin.close()

    run_scenario(scenario, timeout=90)
