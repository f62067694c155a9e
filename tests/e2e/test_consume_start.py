"""Where a gray consumer starts (README, "Where a consumer starts"), with the real CLI and real processes.

A group that never committed an offset starts every queue at ``--from`` (default ``last``), gray
queues included; a group that committed offsets starts a never-committed gray queue at its first
message, so no gray message held for the group's gray consumers is skipped.
"""

from __future__ import annotations

import signal

import pytest

from graymq.devkit.processes import GraymqProcess
from tests.support.cli import held_queues, json_lines, produce, start_consumer, wait_for

pytestmark = pytest.mark.e2e
TOPIC = "TOPIC_START"
GRAY_QUEUES = {0, 5}


@pytest.fixture
def ns(cluster) -> str:
    cluster.add_broker("broker-a")
    cluster.create_topic(TOPIC, 6, 2)
    return str(cluster.ns_url)


def send_gray(ns: str, count: int) -> set[str]:
    sent = produce(ns, TOPIC, "--group", "P_START", "--gray", "--count", str(count), "--size", "16")
    assert {s["queue_id"] for s in sent} <= GRAY_QUEUES
    return {s["msg_id"] for s in sent}


def send_normal(ns: str, count: int) -> set[str]:
    sent = produce(ns, TOPIC, "--group", "P_START", "--count", str(count), "--size", "16")
    return {s["msg_id"] for s in sent}


def consumed(proc: GraymqProcess) -> set[str]:
    return {m["msg_id"] for m in json_lines(proc)}


def holding(ns: str, group: str, client_id: str, queue_ids: set[int]) -> bool:
    held = held_queues(ns, group).get(client_id, set())
    return {int(q.rsplit(":", 1)[1]) for q in held if f":{TOPIC}:" in q} == queue_ids


def stop(proc: GraymqProcess) -> None:
    proc.proc.send_signal(signal.SIGINT)
    assert proc.proc.wait(30) == 0, proc.output[-2000:]


def test_a_new_groups_gray_consumer_starts_at_last_and_resumes_where_it_stopped(ns, graymq_process):
    old = send_gray(ns, 30)
    gray = start_consumer(graymq_process, ns, "G_NEW", "g1", TOPIC, "*", "--gray")
    wait_for(lambda: holding(ns, "G_NEW", "g1", GRAY_QUEUES), 30, "the gray consumer holding the gray queues")
    new = send_gray(ns, 10)
    wait_for(lambda: new <= consumed(gray), 30, "the new gray messages")
    assert not old & consumed(gray), "a new group's gray consumer replayed the gray history"
    stop(gray)
    while_stopped = send_gray(ns, 5)
    again = start_consumer(graymq_process, ns, "G_NEW", "g1", TOPIC, "*", "--gray")
    wait_for(lambda: while_stopped <= consumed(again), 30, "the gray messages sent while it was stopped")
    assert not (old | new) & consumed(again)


def test_a_gray_queue_the_group_never_committed_starts_at_its_first_message(ns, graymq_process):
    held_for_gray = send_gray(ns, 25)  # before the group has any gray consumer
    normal = start_consumer(graymq_process, ns, "G_OLD", "n1", TOPIC, "*")
    wait_for(lambda: holding(ns, "G_OLD", "n1", {1, 2, 3, 4}), 30, "the normal consumer holding the normal queues")
    normal_sent = send_normal(ns, 20)
    wait_for(lambda: normal_sent <= consumed(normal), 30, "the normal messages (the group commits offsets)")
    stop(normal)
    assert not held_for_gray & consumed(normal)
    gray = start_consumer(graymq_process, ns, "G_OLD", "g1", TOPIC, "*", "--gray")
    wait_for(lambda: held_for_gray <= consumed(gray), 30, "every gray message from the first")
