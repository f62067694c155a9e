"""Chaos, lanes: kill -9 of a lane consumer during its lane's promote (docs/lanes.md), on PostgreSQL.

Lane v2 has two consumer processes in the group, lane v3 one, base two; producers of all three send throughout.
``graymq gray promote --lane v2`` starts, and one v2 consumer is killed with SIGKILL while the promote drains: the
other takes its queues over (at the committed offset: what it had consumed but not committed comes again) and the
promote SUCCEEDS. Checked: 0 lost, v3 untouched (it consumed only its lane's messages and kept consuming), the lost
and duplicated figures printed. Runs with ``make chaos`` (not in ``make test``'s subset).
"""

from __future__ import annotations

import json
import signal
import time
from collections import Counter

import pytest

from graymq.devkit.processes import GraymqProcess
from tests.support.cli import json_lines, start_consumer, wait_for
from tests.support.cluster import Cluster

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(400)]
GROUP, PRODUCERS, TOPIC = "GID_LANE_CHAOS", "PID_LANE_CHAOS", "TOPIC_LANE_CHAOS"
COUNT = 600


def _producer(start, ns: str, client_id: str, *lane: str) -> GraymqProcess:  # type: ignore[no-untyped-def]
    return start("produce", TOPIC, "--group", PRODUCERS, "--client-id", client_id, *lane, "--count", str(COUNT),
                 "--size", "32", "--interval", "0.01", "--json", "--nameserver", ns, wait=False)


def test_a_lane_consumer_killed_during_its_lanes_promote_loses_nothing(cluster: Cluster, graymq_process) -> None:
    cluster.add_broker("broker-a")
    cluster.create_topic(TOPIC, 6, 2, lanes=2)
    ns = cluster.ns_url
    consumers = {cid: start_consumer(graymq_process, ns, GROUP, cid, TOPIC, "*", *extra)
                 for cid, extra in (("b1", ()), ("b2", ()), ("v2a", ("--lane", "v2")), ("v2b", ("--lane", "v2")),
                                    ("v3a", ("--lane", "v3")))}
    producers = [_producer(graymq_process, ns, "p-base"), _producer(graymq_process, ns, "p-v2", "--lane", "v2"),
                 _producer(graymq_process, ns, "p-v3", "--lane", "v3")]
    time.sleep(2.0)
    promote = graymq_process("gray", "promote", GROUP, "--lane", "v2", "--producer-group", PRODUCERS, "--timeout",
                             "120", "--json", "--nameserver", ns, wait=False)
    promote.wait_for_line("started", 30)
    promote_started = time.monotonic()
    time.sleep(0.3)
    consumers["v2a"].proc.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    assert promote.proc.wait(180) == 0, promote.output[-3000:]
    report = json.loads([line for line in promote.output.splitlines() if line.startswith("{")][-1])
    for p in producers:
        p.proc.wait(120)
    sent = {s["msg_id"]: s for p in producers for s in json_lines(p) if s.get("status") == "SEND_OK"}
    live = [c for cid, c in consumers.items() if cid != "v2a"]

    def consumed() -> list[dict]:
        return [m for c in consumers.values() for m in json_lines(c)]

    wait_for(lambda: set(sent) <= {m["msg_id"] for m in consumed()}, 90, "every message consumed")
    events = consumed()
    counts = Counter(m["msg_id"] for m in events)
    lost = set(sent) - set(counts)
    print(f"lane chaos: {len(sent)} sent, {len(lost)} lost, {sum(n - 1 for n in counts.values())} consumed twice "
          f"(v2a killed {killed_at - promote_started:.1f}s into the promote), promote {report['state']}")
    assert not lost and report["state"] == "SUCCEEDED"
    v3_sent = {m for m, s in sent.items() if s.get("lane") == "v3"}
    assert {m["msg_id"] for m in json_lines(consumers["v3a"])} <= v3_sent | {m for m, s in sent.items()
                                                                             if not s.get("gray")}
    for c in live:
        c.terminate()
