"""`graymq gray rollout` on real processes where a pasted runbook meets it: started just before its gray consumer
registers, it waits for it (``--wait-for-gray``); a broker that stops answering mid-step holds the weight (no check,
no failure, a line saying why) and the rollout goes on once it can."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from typing import Any

import pytest

from graymq.devkit.processes import GraymqProcess
from tests.support.cli import start_consumer, wait_for

pytestmark = pytest.mark.integration
GROUP = "GID_HOLD"
TOPIC = "TOPIC_HOLD"


def rollout(ns: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "graymq.gray_controller.cli", "gray", "rollout", GROUP,
                             "--steps", "20", "--step-seconds", "1", "--min-messages", "5", "--then", "hold",
                             "--timeout", "60", "--json", "--nameserver", ns, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finished(proc: subprocess.Popen[str]) -> tuple[int, dict[str, Any], str]:
    out, err = proc.communicate(timeout=120)
    assert out.strip(), err
    return proc.returncode, json.loads(out.strip().splitlines()[-1]), err


def with_traffic(cluster, graymq_process, *brokers: str) -> GraymqProcess:
    for name in brokers:
        cluster.add_broker(name)
    cluster.create_topic(TOPIC, 4, 2)
    cluster.ns_call(lambda ns: ns.add_rule(GROUP, {"version": "v2"}, True))
    start_consumer(graymq_process, cluster.ns_url, GROUP, "v1", TOPIC, "*", "--label", "version=v1")
    return graymq_process("produce", TOPIC, "--group", GROUP, "--count", "4000", "--size", "32", "--interval",
                          "0.01", "--nameserver", cluster.ns_url, wait=False)


def progress_until(proc: subprocess.Popen[str], text: str) -> str:
    """The rollout's progress lines up to the first containing ``text`` (the whole output if it ends first)."""
    assert proc.stderr is not None
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if text in line:
            break
    return "".join(lines)


def test_a_rollout_started_before_its_gray_consumer_registers_waits_for_it(cluster, graymq_process) -> None:
    with_traffic(cluster, graymq_process, "broker-a")
    started = rollout(cluster.ns_url)
    waiting = f"waiting up to 30 s for a gray consumer of {GROUP}"
    before = progress_until(started, waiting)  # the gray consumer starts only once the rollout says it waits for one
    start_consumer(graymq_process, cluster.ns_url, GROUP, "v2", TOPIC, "*", "--label", "version=v2")
    code, report, progress = finished(started)
    assert (code, report["outcome"]) == (0, "HELD"), (report, before + progress)
    assert waiting in before, before


def test_a_rollout_holds_its_weight_while_a_broker_does_not_answer_then_goes_on(cluster, graymq_process) -> None:
    with_traffic(cluster, graymq_process, "broker-a", "broker-b")
    start_consumer(graymq_process, cluster.ns_url, GROUP, "v2", TOPIC, "*", "--label", "version=v2")
    started = rollout(cluster.ns_url, "--steps", "20,40", "--step-seconds", "3")
    broker_b = cluster.brokers["broker-b"].proc
    wait_for(lambda: _weight(cluster) == 20, 30, "the rollout at its first step")
    broker_b.send_signal(signal.SIGSTOP)
    try:
        holding = _stderr_line(started, "holding weight 20% (no check while backlog unavailable")
        assert "broker-b" in holding, holding
        assert started.poll() is None and _weight(cluster) == 20  # neither failed nor advanced
    finally:
        broker_b.send_signal(signal.SIGCONT)
    code, report, progress = finished(started)
    assert (code, report["outcome"]) == (0, "HELD"), (report, progress)
    assert [(c["weight"], c["verdict"]) for c in report["checks"]] == [(20, "pass"), (40, "pass")], report


def _weight(cluster) -> int:  # type: ignore[no-untyped-def]
    return int(cluster.ns_call(lambda ns: ns.get_group(GROUP)).settings.gray_weight)


def _stderr_line(proc: subprocess.Popen[str], needle: str) -> str:
    assert proc.stderr is not None
    for line in proc.stderr:
        if needle in line:
            return line
    raise AssertionError(f"{needle!r} never printed (exit {proc.wait()})")
