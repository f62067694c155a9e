"""``graymq consume --fail-rate``: a drill for a bad release — the listener fails a share of its messages,
they come back through the retry topic, and every message is eventually accepted once, nothing lost."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.support.cli import graymq, json_lines, produce, start_consumer, wait_for

pytestmark = pytest.mark.e2e


def test_failed_messages_come_again_and_each_is_accepted_once(cluster, graymq_process) -> None:
    cluster.add_broker("broker-a", GRAYMQ_BROKER_DELAY_LEVELS_S=",".join(["0.2"] * 18))
    cluster.create_topic("DRILL", 4, 0)
    ns = cluster.ns_url
    flaky = start_consumer(graymq_process, ns, "GID_DRILL", "flaky", "DRILL", "*", "--fail-rate", "0.5",
                           "--from", "first")
    sent = {s["msg_id"] for s in produce(ns, "DRILL", "--count", "60", "--size", "16")}
    wait_for(lambda: sent <= {m["msg_id"] for m in json_lines(flaky)}, 90, "every message accepted")
    assert flaky.terminate() == 0
    accepted = Counter(m["msg_id"] for m in json_lines(flaky))
    assert set(accepted) >= sent and max(accepted.values()) == 1
    retried = {m["msg_id"] for m in json_lines(flaky) if m["topic"] != "DRILL"}
    print(f"fail-rate drill: {len(sent)} sent, {len(accepted)} accepted once, {len(retried)} after a retry")


def test_a_fail_rate_outside_0_to_1_is_refused(cluster) -> None:
    result = graymq(cluster.ns_url, "consume", "DRILL", "--group", "g", "--fail-rate", "1.5", check=False)
    assert result.returncode == 2 and "--fail-rate must be between 0 and 1" in result.stderr
