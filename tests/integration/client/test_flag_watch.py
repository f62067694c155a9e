"""Flag changes reach clients through the name server watch, not at their next heartbeat.

The clients here heartbeat the name server once every two minutes, so a flip seen within the
tests' 30 s can only have come through the watch.
"""

from __future__ import annotations

import pytest

from graymq.client import Message, Producer
from tests.support.clients import Recorder, consumer, run_scenario, wait_until

pytestmark = pytest.mark.integration
GROUP = "WATCH_GROUP"
TOPIC = "TOPIC_WATCHED"
RARE_S = 120.0  # heartbeat interval to the name server: longer than any wait below
PUSHED_S = 30.0


def test_producer_and_consumer_flags_follow_an_operator_flip_without_waiting_for_a_heartbeat(cluster):
    cluster.add_broker("broker-a")
    cluster.create_topic(TOPIC, 4, 1)
    ns_url = cluster.ns_url

    async def scenario() -> None:
        recorder = Recorder()
        c1 = consumer(recorder, ns_url, GROUP, "c1", {TOPIC: "*"}, nameserver_interval_s=RARE_S)
        c2 = consumer(recorder, ns_url, GROUP, "c2", {TOPIC: "*"}, nameserver_interval_s=RARE_S)
        producer = Producer(GROUP, ns_url, client_id="p1", heartbeat_interval_s=RARE_S)
        await c1.start()
        await c2.start()
        await producer.start()
        admin = cluster.admin()
        try:
            assert not (c1.gray or c2.gray or producer.gray)
            await admin.set_flag(GROUP, "p1", True)
            await admin.set_flag(GROUP, "c1", True)
            await wait_until(lambda: producer.gray and c1.gray, PUSHED_S, "the flip pushed to p1 and c1")
            await wait_until(lambda: [mq.queue_id for mq in c1.assigned() if mq.topic == TOPIC] == [0],
                             PUSHED_S, "c1 on the gray queue")
            sent = await producer.send(Message(TOPIC, b"gray"))
            assert sent.gray and sent.queue.queue_id == 0
            await wait_until(lambda: sent.msg_id in recorder.msg_ids(), PUSHED_S, "the gray message consumed")
            assert {e.client_id for e in recorder.events if e.msg_id == sent.msg_id} == {"c1"}

            await admin.set_flag(GROUP, "p1", False)
            await admin.set_flag(GROUP, "c1", False)  # c1 drains the (empty) gray queue, then flips
            await wait_until(lambda: not producer.gray and not c1.gray, PUSHED_S, "the promote pushed")
            assert c1.state == "NORMAL"

            await admin.set_switch(GROUP, False)  # every queue normal: c2 learns it at once and takes its share
            await wait_until(lambda: not c2.gray_switch and not producer.gray_switch, PUSHED_S, "the switch pushed")
        finally:
            await admin.close()
            await producer.stop()
            await c1.stop()
            await c2.stop()

    run_scenario(scenario)
