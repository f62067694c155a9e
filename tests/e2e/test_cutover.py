"""Promote and rollback end to end, under continuous load, with real consumer and producer processes.

v1 (label version=v1) and v2 (label version=v2) consumers and producers share group
GID_ORDER; a rule makes version=v2 gray. The controller is the real `graymq gray` command.
"""

from __future__ import annotations

import json
import signal
from collections import Counter

import pytest

from graymq.devkit.processes import GraymqProcess
from tests.support.cli import graymq, held_queues, json_lines, start_consumer, wait_for

pytestmark = pytest.mark.e2e
GROUP = "GID_ORDER"
TOPIC = "TOPIC_V_ORDER"
GRAY_QUEUES = (0, 5)


@pytest.fixture
def release(cluster, graymq_process):
    """A cluster with the topic, the v2 gray rule, and v1a v1b v2a v2b consumers settled on their queues."""
    cluster.add_broker("broker-a")
    cluster.create_topic(TOPIC, 6, 2)
    cluster.ns_call(lambda ns: ns.add_rule(GROUP, {"version": "v2"}, True))
    ns = cluster.ns_url
    consumers = {cid: start_consumer(graymq_process, ns, GROUP, cid, TOPIC, "*", "--label", f"version={cid[:2]}")
                 for cid in ("v1a", "v1b", "v2a", "v2b")}

    def settled() -> bool:
        held = held_queues(ns, GROUP)
        mine = {c: sorted(int(q.rsplit(":", 1)[1]) for q in held.get(c, ()) if f":{TOPIC}:" in q) for c in consumers}
        return mine == {"v1a": [1, 2], "v1b": [3, 4], "v2a": [0], "v2b": [5]}

    wait_for(settled, 40, "initial allocation")
    return cluster, consumers


def start_producer(graymq_process, ns: str, version: str, count: int, interval: float = 0.004) -> GraymqProcess:
    return graymq_process("produce", TOPIC, "--group", GROUP, "--label", f"version={version}", "--count",
                          str(count), "--size", "64", "--interval", str(interval), "--json", "--client-id",
                          f"producer-{version}", "--nameserver", ns, wait=False)


def sent_messages(*producers: GraymqProcess) -> dict[str, dict]:
    return {s["msg_id"]: s for p in producers for s in json_lines(p) if s.get("status") == "SEND_OK"}


def consumed(consumers: dict[str, GraymqProcess]) -> list[dict]:
    return [m for c in consumers.values() for m in json_lines(c)]


def check_no_loss_and_isolation(sent: dict[str, dict], consumers: dict[str, GraymqProcess]) -> Counter[str]:
    """Zero lost; v1 never consumed a gray message; v2 consumed gray queues only until it moved to normal ones."""
    events = consumed(consumers)
    ids = Counter(m["msg_id"] for m in events)
    lost = set(sent) - set(ids)
    assert not lost, f"{len(lost)} messages lost, e.g. {[sent[m] for m in list(lost)[:3]]}"
    for m in events:
        if m["client_id"].startswith("v1"):
            assert not m["gray"], f"v1 consumed a gray message: {m}"
    for cid in ("v2a", "v2b"):
        seen_normal_queue = False
        for m in json_lines(consumers[cid]):
            if m["queue_id"] in GRAY_QUEUES:
                assert not seen_normal_queue, f"{cid} went back to a gray queue after its flip: {m}"
                assert m["gray"], f"{cid} consumed a normal message while gray: {m}"
            else:
                seen_normal_queue = True
    return Counter({mid: n for mid, n in ids.items() if n > 1})


def wait_consumed(sent: dict[str, dict], consumers: dict[str, GraymqProcess], timeout: float = 60) -> None:
    wait_for(lambda: set(sent) <= {m["msg_id"] for m in consumed(consumers)}, timeout, "every message consumed")


def stop_all(consumers: dict[str, GraymqProcess]) -> None:
    for proc in consumers.values():
        assert proc.terminate() == 0, proc.output[-2000:]


def test_promote_under_continuous_load_loses_nothing(release, graymq_process):
    cluster, consumers = release
    ns = cluster.ns_url
    producers = [start_producer(graymq_process, ns, "v1", 1500), start_producer(graymq_process, ns, "v2", 1500)]
    wait_for(lambda: len(sent_messages(*producers)) > 400, 60, "load to build up")
    result = graymq(ns, "gray", "promote", GROUP, "--timeout", "90", "--json", timeout=120)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["state"] == "SUCCEEDED" and report["gray_backlog"] == 0 and not report["gray_consumers_left"]
    assert sorted(report["consumers_flipped"]) == ["v2a", "v2b"]
    assert "producer-v2" in " ".join(report["producers_flipped"])
    for p in producers:
        p.proc.wait(120)
    sent = sent_messages(*producers)
    assert len(sent) == 3000
    gray_sent = [s for s in sent.values() if s["gray"]]
    assert gray_sent and all(s["queue_id"] in GRAY_QUEUES for s in gray_sent)
    wait_consumed(sent, consumers)
    status = json.loads(graymq(ns, "gray", "status", GROUP, "--json").stdout)
    assert status["gray_backlog"] == 0
    assert all(not c["gray"] and c["state"] == "NORMAL" for c in status["clients"])
    held = held_queues(ns, GROUP)
    assert not any(q.endswith((":0", ":5")) for qs in held.values() for q in qs if f":{TOPIC}:" in q)
    stop_all(consumers)
    duplicates = check_no_loss_and_isolation(sent, consumers)
    print(f"promote under load: sent {len(sent)}, duplicates {sum(duplicates.values())}")
    assert not duplicates, "a planned hand-over redelivered messages"


def test_rollback_drain_lets_gray_consumers_finish(release, graymq_process):
    cluster, consumers = release
    ns = cluster.ns_url
    producers = [start_producer(graymq_process, ns, "v1", 600), start_producer(graymq_process, ns, "v2", 600)]
    wait_for(lambda: len(sent_messages(*producers)) > 200, 60, "load")
    result = graymq(ns, "gray", "rollback", GROUP, "--drain", "--timeout", "90", "--json", timeout=120)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["state"] == "SUCCEEDED" and report["gray_backlog"] == 0
    assert sorted(report["gray_consumers_left"]) == ["v2a", "v2b"]  # still gray, holding empty gray queues
    for p in producers:
        p.proc.wait(120)
    sent = sent_messages(*producers)
    wait_consumed(sent, consumers)
    after_rollback = [s for s in sent.values() if s["gray"]]
    assert all(s["queue_id"] in GRAY_QUEUES for s in after_rollback)
    stop_all(consumers)
    check_no_loss_and_isolation(sent, consumers)


def test_rollback_adopt_hands_gray_backlog_to_normal_consumers(release, graymq_process):
    cluster, consumers = release
    ns = cluster.ns_url
    for cid in ("v2a", "v2b"):  # the gray pods go away first ...
        assert consumers[cid].terminate() == 0
    gray_producer = start_producer(graymq_process, ns, "v2", 200, interval=0)
    gray_producer.proc.wait(60)  # ... and gray messages pile up in the gray queues
    sent = sent_messages(gray_producer)
    assert len(sent) == 200 and all(s["gray"] for s in sent.values())
    result = graymq(ns, "gray", "rollback", GROUP, "--adopt", "--timeout", "60", "--json", timeout=90)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["state"] == "SUCCEEDED" and report["gray_backlog"] == 0
    wait_consumed(sent, consumers)
    events = consumed(consumers)
    adopters = {m["client_id"] for m in events if m["msg_id"] in sent}
    assert adopters <= {"v1a", "v1b"} and adopters
    assert json.loads(graymq(ns, "gray", "status", GROUP, "--json").stdout)["orphan_policy"] == "hold"
    stop_all({k: v for k, v in consumers.items() if k.startswith("v1")})
    assert not set(sent) - {m["msg_id"] for m in events}


def test_promote_killed_midway_resumes_and_finishes(release, graymq_process):
    cluster, consumers = release
    ns = cluster.ns_url
    producers = [start_producer(graymq_process, ns, "v1", 800), start_producer(graymq_process, ns, "v2", 800)]
    wait_for(lambda: len(sent_messages(*producers)) > 200, 60, "load")
    controller = graymq_process("gray", "promote", GROUP, "--timeout", "90", "--nameserver", ns, wait=False,
                                env={"GRAYMQ_ADMIN_TOKEN": "dev-token"})
    controller.wait_for_line("started", timeout=30)
    controller.proc.send_signal(signal.SIGKILL)
    controller.proc.wait(10)
    running = cluster.ns_call(lambda c: c.list_cutovers(GROUP, state="RUNNING"))
    assert len(running) == 1 and running[0].kind == "promote"
    result = graymq(ns, "gray", "promote", GROUP, "--timeout", "90", "--json", timeout=120)
    assert f"resuming promote #{running[0].id}" in result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["operation_id"] == running[0].id and report["state"] == "SUCCEEDED" and report["resumed"]
    assert cluster.ns_call(lambda c: c.list_cutovers(GROUP, state="RUNNING")) == []
    for p in producers:
        p.proc.wait(120)
    sent = sent_messages(*producers)
    wait_consumed(sent, consumers)
    stop_all(consumers)
    check_no_loss_and_isolation(sent, consumers)
