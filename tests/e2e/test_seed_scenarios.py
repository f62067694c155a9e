"""The seed's §5 scenarios end to end: real name server (Postgres), broker and `graymq consume` processes.

TOPIC_V_ORDER and TOPIC_V_PAYMENT have 6 queues, 2 gray (0 and 5). v1a, v1b are normal and
v2a, v2b gray consumers of one group. Each scenario states exactly which client consumes
which message from which queue: v2a holds gray queue 0, v2b gray queue 5, v1a normal queues
1-2 and v1b 3-4 of every topic they subscribe to.
"""

from __future__ import annotations

import pytest

from tests.support.cli import held_queues, json_lines, produce, start_consumer, wait_for

pytestmark = pytest.mark.e2e
GROUP = "GID_ORDER"
ORDER, PAYMENT = "TOPIC_V_ORDER", "TOPIC_V_PAYMENT"
OWNER = {0: "v2a", 5: "v2b", 1: "v1a", 2: "v1a", 3: "v1b", 4: "v1b"}


def run_scenario(cluster, graymq_process, v1: tuple[str, str], v2: tuple[str, str],
                 sends: list[tuple[str, str, bool]]) -> None:
    """``v1``/``v2``: (topics, tag expression); ``sends``: (topic, tag, gray) batches of 4 messages."""
    cluster.add_broker("broker-a")
    cluster.create_topic(ORDER, 6, 2)
    cluster.create_topic(PAYMENT, 6, 2)
    ns = cluster.ns_url
    consumers = {
        "v1a": start_consumer(graymq_process, ns, GROUP, "v1a", v1[0], v1[1]),
        "v1b": start_consumer(graymq_process, ns, GROUP, "v1b", v1[0], v1[1]),
        "v2a": start_consumer(graymq_process, ns, GROUP, "v2a", v2[0], v2[1], "--gray"),
        "v2b": start_consumer(graymq_process, ns, GROUP, "v2b", v2[0], v2[1], "--gray"),
    }
    expected_held = {}
    for client, (topics, _) in {"v1a": v1, "v1b": v1, "v2a": v2, "v2b": v2}.items():
        expected_held[client] = {f"broker-a:{t}:{q}" for t in topics.split(",") for q, owner in OWNER.items()
                                 if owner == client}

    def settled() -> bool:
        held = held_queues(ns, GROUP)
        return {c: {q for q in held.get(c, set()) if "%RETRY%" not in q} for c in expected_held} == expected_held

    wait_for(settled, 40, f"allocation {expected_held}")

    sent = []
    for topic, tag, gray in sends:
        args = ["--group", "PID_ORDER", "--count", "4", "--size", "32"] + (["--tag", tag] if tag else [])
        sent += produce(ns, topic, *args, *(["--gray"] if gray else []))
    expected = {}  # msg_id -> (client, topic, queue)
    for s in sent:
        client = OWNER[s["queue_id"]]
        subscribed = v2 if client.startswith("v2") else v1
        assert s["gray"] == (s["queue_id"] in (0, 5)), f"gray send on the wrong queue: {s}"
        if s["topic"] in subscribed[0].split(","):
            expected[s["msg_id"]] = (client, s["topic"], s["queue_id"])

    def consumed() -> dict[str, tuple[str, str, int]]:
        return {m["msg_id"]: (m["client_id"], m["topic"], m["queue_id"])
                for c in consumers.values() for m in json_lines(c)}

    wait_for(lambda: set(expected) <= set(consumed()), 30, "every subscribed message consumed")
    for proc in consumers.values():
        proc.terminate()
    got = consumed()
    assert {k: got[k] for k in expected} == expected
    unexpected = set(got) - set(expected)
    assert not unexpected, f"consumed messages nobody subscribed to: {[got[k] for k in unexpected]}"
    counts = [m["msg_id"] for c in consumers.values() for m in json_lines(c)]
    assert len(counts) == len(set(counts)), "no message consumed twice"


def test_5_1_same_topic_and_tag(cluster, graymq_process):
    run_scenario(cluster, graymq_process, (ORDER, "*"), (ORDER, "*"),
                 [(ORDER, "", False), (ORDER, "", True)])


def test_5_2_gray_version_adds_a_topic(cluster, graymq_process):
    run_scenario(cluster, graymq_process, (ORDER, "*"), (f"{ORDER},{PAYMENT}", "*"),
                 [(ORDER, "", False), (ORDER, "", True), (PAYMENT, "", True)])


def test_5_3_gray_version_drops_a_topic(cluster, graymq_process):
    run_scenario(cluster, graymq_process, (f"{ORDER},{PAYMENT}", "*"), (ORDER, "*"),
                 [(ORDER, "", False), (ORDER, "", True), (PAYMENT, "", False)])


def test_5_4_tag_changes(cluster, graymq_process):
    run_scenario(cluster, graymq_process, (ORDER, "v1"), (ORDER, "v2"),
                 [(ORDER, "v1", False), (ORDER, "v2", True)])


def test_5_5_topic_and_tag_change(cluster, graymq_process):
    run_scenario(cluster, graymq_process, (ORDER, "v1"), (f"{ORDER},{PAYMENT}", "v2"),
                 [(ORDER, "v1", False), (ORDER, "v2", True), (PAYMENT, "v2", True)])
