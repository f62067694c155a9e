"""A promote started from the console runs inside the name server as a background task: while it waits for a gray
consumer to drain, the name server keeps answering REST requests, and the promote finishes once the consumer
drains. Real name server, broker and consumer processes."""

from __future__ import annotations

import signal
import time

import httpx
import pytest

from tests.support.cli import graymq, held_queues, produce, start_consumer, wait_for

pytestmark = pytest.mark.e2e
GROUP = "G_BUSY"
TOPIC = "T_BUSY"
READS = 20


def test_rest_requests_are_answered_while_a_console_promote_drains(cluster, graymq_process) -> None:
    cluster.add_broker("broker-a")
    cluster.create_topic(TOPIC, 4, 2)
    ns = cluster.ns_url
    cluster.ns_call(lambda c: c.add_rule(GROUP, {"version": "v2"}, True))
    graymq(ns, "gray", "switch", GROUP, "on")
    consumers = {cid: start_consumer(graymq_process, ns, GROUP, cid, TOPIC, "*", "--label", f"version={cid}")
                 for cid in ("v1", "v2")}
    wait_for(lambda: any(q.endswith((":0", ":3")) for q in held_queues(ns, GROUP).get("v2", ())), 40,
             "v2 holding the gray queues")
    gray = consumers["v2"]
    gray.proc.send_signal(signal.SIGSTOP)  # the gray backlog below stays until it is continued
    try:
        produce(ns, TOPIC, "--group", GROUP, "--gray", "--count", "20", "--size", "32")
        with httpx.Client(base_url=ns, timeout=10.0) as http:
            started = http.post(f"/console/api/groups/{GROUP}/actions",
                                json={"action": {"action": "promote"}, "reason": "serving test"})
            assert started.status_code == 200, started.text
            operation = f"/v1/cutovers/{started.json()['operation_id']}"
            wait_for(lambda: http.get(operation).json()["step"] == "drain", 30, "the promote draining")

            latencies = []
            for _ in range(READS):
                begin = time.monotonic()
                answers = [http.get(f"/v1/groups/{GROUP}"), http.get(f"/v1/groups/{GROUP}/clients")]
                latencies.append(time.monotonic() - begin)
                assert [a.status_code for a in answers] == [200, 200], [a.text for a in answers]
            still = http.get(operation).json()
            assert (still["state"], still["step"]) == ("RUNNING", "drain"), still  # answered while it drained
            print(f"{READS} reads while draining: max {max(latencies) * 1000:.1f} ms, "
                  f"median {sorted(latencies)[READS // 2] * 1000:.1f} ms")
    finally:
        gray.proc.send_signal(signal.SIGCONT)
    wait_for(lambda: cluster.ns_call(lambda c: c.list_cutovers(GROUP))[0].state == "SUCCEEDED", 60,
             "the promote succeeding once v2 drained")
