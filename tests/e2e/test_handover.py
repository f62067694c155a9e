"""Queue hand-overs under continuous load, with real orderly consumer and producer processes: promote,
rollback, consumers joining and leaving deliver every message exactly once and each queue in order; a
consumer killed with -9 loses nothing and only what it had consumed since its last commit comes again."""

from __future__ import annotations

import json
import signal
from collections import Counter, defaultdict
from typing import Any

import pytest

from graymq.devkit.processes import GraymqProcess
from tests.support.cli import graymq, held_queues, json_lines, start_consumer, wait_for

pytestmark = pytest.mark.e2e
GROUP = "GID_HANDOVER"
TOPIC = "TOPIC_HANDOVER"


def consumer(graymq_process, ns: str, client_id: str, version: str = "v1") -> GraymqProcess:
    return start_consumer(graymq_process, ns, GROUP, client_id, TOPIC, "*", "--label", f"version={version}",
                          "--orderly", "--from", "first")


def producer(graymq_process, ns: str, version: str, count: int, interval: float = 0.004) -> GraymqProcess:
    return graymq_process("produce", TOPIC, "--group", GROUP, "--label", f"version={version}", "--count", str(count),
                          "--size", "32", "--interval", str(interval), "--json", "--client-id", f"producer-{version}",
                          "--nameserver", ns, wait=False)


def sent_by(*producers: GraymqProcess) -> dict[str, dict[str, Any]]:
    return {s["msg_id"]: s for p in producers for s in json_lines(p) if s.get("status") == "SEND_OK"}


class Delivery:
    """What the consumers printed, checked against what was sent."""

    def __init__(self, sent: dict[str, dict[str, Any]], consumers: dict[str, GraymqProcess]) -> None:
        self.sent = sent
        self.events = [m for c in consumers.values() for m in json_lines(c)]
        self.per_consumer = {cid: json_lines(c) for cid, c in consumers.items()}
        counts = Counter(m["msg_id"] for m in self.events)
        self.lost = set(sent) - set(counts)
        self.duplicated = {mid: n - 1 for mid, n in counts.items() if n > 1}

    def out_of_order(self) -> list[str]:
        """Each consumer sees each queue in offset order, and each queue's consumers take turns: the offsets
        one consumer consumed of a queue never interleave with another's."""
        problems = []
        spans: dict[int, list[tuple[int, int, str]]] = defaultdict(list)
        for cid, events in self.per_consumer.items():
            by_queue: dict[int, list[int]] = defaultdict(list)
            for m in events:
                by_queue[m["queue_id"]].append(m["queue_offset"])
            for queue, offsets in by_queue.items():
                if offsets != sorted(offsets):
                    problems.append(f"{cid} consumed queue {queue} out of order")
                runs, start = [], offsets[0]
                for previous, offset in zip(offsets, offsets[1:], strict=False):
                    if offset != previous + 1:
                        runs.append((start, previous))
                        start = offset
                runs.append((start, offsets[-1]))
                spans[queue] += [(a, b, cid) for a, b in runs]
        for queue, runs in spans.items():
            runs.sort()
            for (a1, b1, c1), (a2, b2, c2) in zip(runs, runs[1:], strict=False):
                if a2 <= b1:
                    problems.append(f"queue {queue}: {c1} consumed {a1}..{b1} while {c2} consumed {a2}..{b2}")
        return problems

    def check_exactly_once(self) -> None:
        assert not self.lost, f"{len(self.lost)} lost"
        assert not self.duplicated, f"{sum(self.duplicated.values())} duplicated, e.g. {list(self.duplicated)[:3]}"
        assert not self.out_of_order(), self.out_of_order()[:5]


def wait_all_consumed(sent: dict[str, dict[str, Any]], consumers: dict[str, GraymqProcess],
                      timeout: float = 90) -> None:
    wait_for(lambda: set(sent) <= {m["msg_id"] for c in consumers.values() for m in json_lines(c)}, timeout,
             "every message consumed")


def stop(consumers: dict[str, GraymqProcess]) -> None:
    for proc in consumers.values():
        if proc.proc.poll() is None:
            assert proc.terminate() == 0, proc.output[-2000:]


@pytest.fixture
def gray_release(cluster, graymq_process):
    """v1a v1b (normal) and v2a v2b (gray, by a rule on version=v2) orderly consumers, settled."""
    cluster.add_broker("broker-a")
    cluster.create_topic(TOPIC, 6, 2)
    cluster.ns_call(lambda ns: ns.add_rule(GROUP, {"version": "v2"}, True))
    ns = cluster.ns_url
    consumers = {cid: consumer(graymq_process, ns, cid, cid[:2]) for cid in ("v1a", "v1b", "v2a", "v2b")}
    wait_for(lambda: sum(len(q) for q in held_queues(ns, GROUP).values()) >= 6, 40, "every queue held")
    return ns, consumers


@pytest.mark.parametrize("operation", [("promote",), ("rollback", "--drain")], ids=["promote", "rollback-drain"])
def test_a_cutover_under_load_delivers_each_message_once_and_each_queue_in_order(
    gray_release, graymq_process, operation
) -> None:
    ns, consumers = gray_release
    producers = [producer(graymq_process, ns, "v1", 1200), producer(graymq_process, ns, "v2", 1200)]
    wait_for(lambda: len(sent_by(*producers)) > 400, 60, "load to build up")
    result = graymq(ns, "gray", *operation, GROUP, "--timeout", "90", "--json", timeout=120)
    assert json.loads(result.stdout.strip().splitlines()[-1])["state"] == "SUCCEEDED"
    for p in producers:
        p.proc.wait(120)
    sent = sent_by(*producers)
    assert len(sent) == 2400
    wait_all_consumed(sent, consumers)
    stop(consumers)
    delivery = Delivery(sent, consumers)
    print(f"{operation[0]} under load: sent {len(sent)}, lost {len(delivery.lost)}, "
          f"duplicated {sum(delivery.duplicated.values())}")
    delivery.check_exactly_once()


def test_consumers_joining_and_leaving_under_load_deliver_each_message_once_in_order(cluster, graymq_process) -> None:
    cluster.add_broker("broker-a")
    cluster.create_topic(TOPIC, 8, 0)
    ns = cluster.ns_url
    consumers = {"c1": consumer(graymq_process, ns, "c1")}
    wait_for(lambda: len(held_queues(ns, GROUP).get("c1", ())) == 8, 40, "c1 holding every queue")
    load = producer(graymq_process, ns, "v1", 3000, interval=0.003)
    wait_for(lambda: len(sent_by(load)) > 300, 60, "load")
    for cid in ("c2", "c3"):  # two join, one after the other
        consumers[cid] = consumer(graymq_process, ns, cid)
        wait_for(lambda cid=cid: len(held_queues(ns, GROUP).get(cid, ())) >= 2, 40, f"{cid} holding queues")
    assert consumers["c2"].terminate() == 0  # one leaves
    wait_for(lambda: "c2" not in held_queues(ns, GROUP) or not held_queues(ns, GROUP)["c2"], 40, "c2 gone")
    consumers["c4"] = consumer(graymq_process, ns, "c4")  # and another joins
    load.proc.wait(120)
    sent = sent_by(load)
    assert len(sent) == 3000
    wait_all_consumed(sent, consumers)
    stop(consumers)
    delivery = Delivery(sent, consumers)
    print(f"joins and leaves under load: sent {len(sent)}, lost {len(delivery.lost)}, "
          f"duplicated {sum(delivery.duplicated.values())}, per consumer "
          f"{ {cid: len(events) for cid, events in delivery.per_consumer.items()} }")
    delivery.check_exactly_once()


def test_a_consumer_killed_with_minus_9_loses_nothing_and_only_its_uncommitted_messages_come_again(
    cluster, graymq_process
) -> None:
    cluster.add_broker("broker-a")
    cluster.create_topic(TOPIC, 8, 0)
    ns = cluster.ns_url
    consumers = {cid: consumer(graymq_process, ns, cid) for cid in ("k1", "k2", "victim")}
    wait_for(lambda: len(held_queues(ns, GROUP).get("victim", ())) >= 2, 40, "the victim holding queues")
    load = producer(graymq_process, ns, "v1", 2500, interval=0.003)
    wait_for(lambda: len(json_lines(consumers["victim"])) > 100, 60, "the victim consuming")
    consumers["victim"].proc.send_signal(signal.SIGKILL)
    consumers["victim"].proc.wait(10)
    load.proc.wait(120)
    sent = sent_by(load)
    wait_all_consumed(sent, consumers)
    stop(consumers)
    delivery = Delivery(sent, consumers)
    victim = {m["msg_id"] for m in delivery.per_consumer["victim"]}
    print(f"kill -9 of a consumer under load: sent {len(sent)}, lost {len(delivery.lost)}, duplicated "
          f"{sum(delivery.duplicated.values())} (the victim consumed {len(victim)})")
    assert not delivery.lost
    assert set(delivery.duplicated) <= victim  # only what the victim consumed and had not committed yet
    assert all(n == 1 for n in delivery.duplicated.values())
