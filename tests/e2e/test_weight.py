"""A group's weight end to end, with real consumer and producer processes: `graymq gray weight GID 50` hands the
gray consumer half of the normal queues (and about half of the normal traffic), 0 takes them back, and neither
change loses or repeats a message.

Topic TOPIC_WEIGHT has 8 queues, 2 of them gray (0 and 7), so 6 normal ones (1..6); weight 50 gives the gray side 3
of them, spread evenly: 2, 4 and 6. v1a and v1b are normal consumers, v2a is gray by the rule version=v2; only
normal (v1) producers send.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

import pytest

from graymq.devkit.processes import GraymqProcess
from tests.support.cli import gray_status, graymq, held_queues, json_lines, start_consumer, wait_for

pytestmark = pytest.mark.e2e
GROUP = "GID_WEIGHT"
TOPIC = "TOPIC_WEIGHT"
ALL = set(range(8))
GRAY = {0, 7}
WEIGHTED_50 = {2, 4, 6}
CONSUMERS = ("v1a", "v1b", "v2a")


def queue_ids(queues: set[str]) -> set[int]:
    return {int(q.rsplit(":", 1)[1]) for q in queues if f":{TOPIC}:" in q}


def holds(ns: str, gray_side: set[int]) -> bool:
    """v2a holds exactly ``gray_side``; v1a and v1b the rest between them, each queue once (as they report it)."""
    held = {cid: queue_ids(queues) for cid, queues in held_queues(ns, GROUP).items()}
    v1a, v1b, v2a = (held.get(cid, set()) for cid in CONSUMERS)
    return v2a == gray_side and not v1a & v1b and v1a | v1b == ALL - gray_side


def producer(graymq_process, ns: str, name: str, count: int, interval: float = 0.004) -> GraymqProcess:
    return graymq_process("produce", TOPIC, "--group", GROUP, "--label", "version=v1", "--count", str(count),
                          "--size", "64", "--interval", str(interval), "--json", "--client-id", f"producer-{name}",
                          "--nameserver", ns, wait=False)


def sent_by(*producers: GraymqProcess) -> dict[str, dict[str, Any]]:
    return {s["msg_id"]: s for p in producers for s in json_lines(p) if s.get("status") == "SEND_OK"}


def consumed(consumers: dict[str, GraymqProcess]) -> list[dict[str, Any]]:
    return [m for c in consumers.values() for m in json_lines(c)]


def wait_all_consumed(sent: dict[str, dict[str, Any]], consumers: dict[str, GraymqProcess]) -> None:
    wait_for(lambda: set(sent) <= {m["msg_id"] for m in consumed(consumers)}, 90, "every message consumed")


def set_weight(cluster, weight: int, gray_side: set[int]) -> float:
    """`graymq gray weight`, then poll until every consumer holds its new queues; returns the seconds from the
    change (its audit entry) to then."""
    ns = cluster.ns_url
    out = graymq(ns, "gray", "weight", GROUP, str(weight), "--reason", f"canary at {weight}%").stdout
    assert f"weight of {GROUP}: {weight}%" in out, out
    # the newest weight entry: a producer that finished its count may unregister (an audit entry too) just after
    entry = next(e for e in cluster.ns_call(lambda c: c.list_audit(GROUP, limit=20)) if e.action != "unregister")
    assert (entry.action, entry.after) == ("set_weight", {"gray_weight": weight})
    wait_for(lambda: holds(ns, gray_side), 30, f"the consumers holding their queues at weight {weight}", 0.05)
    return time.time() - entry.at.timestamp()


@pytest.fixture
def weighted_group(cluster, graymq_process):
    """v1a v1b (normal) and v2a (gray) consumers of the 8-queue topic, settled at weight 0."""
    cluster.add_broker("broker-a")
    cluster.create_topic(TOPIC, 8, 2)
    cluster.ns_call(lambda ns: ns.add_rule(GROUP, {"version": "v2"}, True))
    ns = cluster.ns_url
    consumers = {cid: start_consumer(graymq_process, ns, GROUP, cid, TOPIC, "*", "--label", f"version={cid[:2]}")
                 for cid in CONSUMERS}
    wait_for(lambda: holds(ns, GRAY), 40, "the initial allocation")
    return cluster, consumers


def test_weight_50_hands_the_gray_side_half_the_normal_queues_and_0_takes_them_back_losing_nothing(
    weighted_group, graymq_process
) -> None:
    cluster, consumers = weighted_group
    ns = cluster.ns_url
    across_50 = producer(graymq_process, ns, "across-50", 500)
    wait_for(lambda: len(sent_by(across_50)) > 100, 60, "load before the change")
    took_50 = set_weight(cluster, 50, GRAY | WEIGHTED_50)
    status = gray_status(ns, GROUP)
    assert status["gray_weight"] == 50
    weighted = {(w["client_id"], w["queue_id"]) for w in status["weighted_queues"] if w["topic"] == TOPIC}
    assert weighted == {("v2a", q) for q in WEIGHTED_50}
    human = graymq(ns, "gray", "status", GROUP).stdout
    assert "weight 50%" in human and f"broker-a:{TOPIC}:2,4,6" in human, human
    across_50.proc.wait(120)

    steady = producer(graymq_process, ns, "at-50", 1200, interval=0.002)
    steady.proc.wait(120)
    at_50 = sent_by(steady)
    assert len(at_50) == 1200 and all(s["queue_id"] in ALL - GRAY for s in at_50.values())
    wait_all_consumed(at_50, consumers)
    by_v2 = [m for m in json_lines(consumers["v2a"]) if m["msg_id"] in at_50]
    by_v1 = [m for cid in ("v1a", "v1b") for m in json_lines(consumers[cid]) if m["msg_id"] in at_50]
    assert {m["queue_id"] for m in by_v2} <= WEIGHTED_50
    assert {m["queue_id"] for m in by_v1} <= ALL - GRAY - WEIGHTED_50
    share = len({m["msg_id"] for m in by_v2}) / len(at_50)
    assert 0.3 <= share <= 0.7, f"the gray side consumed {share:.0%} of the normal traffic at weight 50"

    across_0 = producer(graymq_process, ns, "across-0", 500)
    wait_for(lambda: len(sent_by(across_0)) > 100, 60, "load before the change back")
    took_0 = set_weight(cluster, 0, GRAY)
    assert gray_status(ns, GROUP)["weighted_queues"] == []
    across_0.proc.wait(120)
    sent = sent_by(across_50, steady, across_0)
    assert len(sent) == 2200
    wait_all_consumed(sent, consumers)
    for proc in consumers.values():
        assert proc.terminate() == 0, proc.output[-2000:]
    events = consumed(consumers)
    counts = Counter(m["msg_id"] for m in events)
    lost = set(sent) - set(counts)
    duplicated = {mid: n - 1 for mid, n in counts.items() if n > 1}
    print(f"weight 0 -> 50 -> 0 under load: sent {len(sent)}, gray side share at 50 {share:.0%}, lost {len(lost)}, "
          f"duplicated {sum(duplicated.values())}; every client holding its new queues {took_50:.2f} s after the "
          f"change to 50, {took_0:.2f} s after the change to 0")
    assert not lost, f"{len(lost)} lost, e.g. {[sent[m] for m in list(lost)[:3]]}"
    assert not duplicated, f"{sum(duplicated.values())} duplicated, e.g. {list(duplicated)[:3]}"
    assert not any(m["gray"] for m in events)


def test_rollback_takes_the_weight_back_at_once_and_promote_leaves_none(weighted_group) -> None:
    cluster, consumers = weighted_group
    ns = cluster.ns_url
    graymq(ns, "gray", "weight", GROUP, "50")
    wait_for(lambda: gray_status(ns, GROUP)["weighted_queues"], 30, "the gray side holding weighted queues")
    report = json.loads(graymq(ns, "gray", "rollback", GROUP, "--drain", "--timeout", "60", "--json",
                               timeout=90).stdout.strip().splitlines()[-1])
    assert report["state"] == "SUCCEEDED"
    status = gray_status(ns, GROUP)
    assert status["gray_weight"] == 0
    wait_for(lambda: not gray_status(ns, GROUP)["weighted_queues"], 30, "the weighted queues handed back")
    graymq(ns, "gray", "weight", GROUP, "25")
    report = json.loads(graymq(ns, "gray", "promote", GROUP, "--timeout", "60", "--json",
                               timeout=90).stdout.strip().splitlines()[-1])
    assert report["state"] == "SUCCEEDED" and gray_status(ns, GROUP)["gray_weight"] == 0
    for proc in consumers.values():
        assert proc.terminate() == 0
