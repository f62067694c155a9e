"""A weight change reaches consumers through the name server watch, not at their next heartbeat.

The consumers heartbeat the name server once every two minutes, so a weight applied within the test's 30 s can
only have come through the watch.
"""

from __future__ import annotations

import pytest

from tests.support.clients import Recorder, consumer, run_scenario, wait_until

pytestmark = pytest.mark.integration
GROUP = "WEIGHT_WATCH_GROUP"
TOPIC = "TOPIC_WEIGHT_WATCHED"
RARE_S = 120.0  # heartbeat interval to the name server: longer than any wait below
PUSHED_S = 30.0
GRAY = [0, 5]  # 6 queues, 2 gray: normal 1..4, of which weight 50 gives the gray side 2 and 4


def test_consumers_apply_a_weight_change_without_waiting_for_a_heartbeat(cluster):
    cluster.add_broker("broker-a")
    cluster.create_topic(TOPIC, 6, 2)
    ns_url = cluster.ns_url

    async def scenario() -> None:
        recorder = Recorder()
        gray = consumer(recorder, ns_url, GROUP, "gray", {TOPIC: "*"}, gray=True, nameserver_interval_s=RARE_S)
        normal = consumer(recorder, ns_url, GROUP, "normal", {TOPIC: "*"}, nameserver_interval_s=RARE_S)
        await gray.start()
        await normal.start()
        admin = cluster.admin()

        def ids(c) -> list[int]:
            return sorted(mq.queue_id for mq in c.assigned() if mq.topic == TOPIC)

        async def set_weight(weight: int) -> None:
            await admin.request("PUT", f"/v1/groups/{GROUP}/weight", json={"weight": weight}, admin=True)

        try:
            await wait_until(lambda: ids(gray) == GRAY and ids(normal) == [1, 2, 3, 4], PUSHED_S, "the allocation")
            await set_weight(50)
            await wait_until(lambda: gray.gray_weight == normal.gray_weight == 50, PUSHED_S, "the weight pushed")
            await wait_until(lambda: ids(gray) == [0, 2, 4, 5] and ids(normal) == [1, 3], PUSHED_S,
                             "the gray side on its share of the normal queues")
            await set_weight(0)
            await wait_until(lambda: ids(gray) == GRAY and ids(normal) == [1, 2, 3, 4], PUSHED_S,
                             "the normal queues back with the normal side")
        finally:
            await admin.close()
            await normal.stop()
            await gray.stop()

    run_scenario(scenario)
