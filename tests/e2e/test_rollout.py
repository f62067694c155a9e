"""`graymq gray rollout` end to end with real consumer and producer processes: a healthy v2 goes through the weighted
steps and ends promoted; a v2 failing half its messages (`--fail-rate 0.5`) is rolled back at the first check — the
gray consumer retires holding nothing, the normal consumers adopt what it held and what it failed, and every message
is accepted, nothing lost.

Topic TOPIC_ROLLOUT has 8 queues, 2 of them gray; v1a and v1b are normal consumers, v2a gray by the rule
version=v2; a v1 producer sends throughout.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from graymq.devkit.processes import GraymqProcess
from tests.support.cli import gray_status, graymq, json_lines, start_consumer, wait_for

pytestmark = pytest.mark.e2e
GROUP = "GID_ROLLOUT"
TOPIC = "TOPIC_ROLLOUT"
FAST_RETRIES = ",".join(["0.2"] * 18)  # delay levels: a failed message comes back 0.2 s later


def start_group(cluster, graymq_process, *v2_args: str) -> dict[str, GraymqProcess]:
    cluster.add_broker("broker-a", GRAYMQ_BROKER_DELAY_LEVELS_S=FAST_RETRIES)
    cluster.create_topic(TOPIC, 8, 2)
    cluster.ns_call(lambda ns: ns.add_rule(GROUP, {"version": "v2"}, True))
    ns = cluster.ns_url
    consumers = {cid: start_consumer(graymq_process, ns, GROUP, cid, TOPIC, "*", "--label", f"version={cid[:2]}",
                                     *(v2_args if cid == "v2a" else ()))
                 for cid in ("v1a", "v1b", "v2a")}
    wait_for(lambda: all(c["queues"] for c in gray_status(ns, GROUP)["clients"]), 40, "every consumer holding queues")
    return consumers


def producer(graymq_process, ns: str, count: int) -> GraymqProcess:
    return graymq_process("produce", TOPIC, "--group", GROUP, "--label", "version=v1", "--count", str(count),
                          "--size", "64", "--interval", "0.004", "--json", "--client-id", "producer-v1",
                          "--nameserver", ns, wait=False)


def clients(ns: str) -> dict[str, tuple[str, list[str]]]:
    return {c["client_id"]: (c["state"], c["queues"]) for c in gray_status(ns, GROUP)["clients"]}


def rollout(ns: str, *args: str) -> tuple[int, dict[str, Any], str]:
    """Run the rollout to its end: exit code, the JSON report, and the progress lines (stderr)."""
    result = graymq(ns, "gray", "rollout", GROUP, "--steps", "25,50", "--step-seconds", "1.5", "--min-messages",
                    "20", "--timeout", "60", "--json", *args, timeout=180, check=False)
    assert result.stdout.strip(), result.stderr
    return result.returncode, json.loads(result.stdout.strip().splitlines()[-1]), result.stderr


def settle(load: GraymqProcess, consumers: dict[str, GraymqProcess]) -> tuple[dict[str, Any], Counter[str]]:
    """Wait for the producer to finish and every message it sent to be accepted; stop the consumers."""
    load.proc.wait(120)
    sent = {s["msg_id"]: s for s in json_lines(load) if s.get("status") == "SEND_OK"}
    wait_for(lambda: set(sent) <= {m["msg_id"] for c in consumers.values() for m in json_lines(c)}, 90,
             "every message accepted")
    for proc in consumers.values():
        assert proc.terminate() == 0, proc.output[-2000:]
    return sent, Counter(m["msg_id"] for c in consumers.values() for m in json_lines(c))


def deliveries_of(msg_ids: set[str], consumers: dict[str, GraymqProcess]) -> list[str]:
    """Where each of ``msg_ids`` was accepted (consumer, topic, queue, offset): a failure names its duplicates."""
    return sorted(f"{m['msg_id']} by {cid} from {m['topic']}:{m['queue_id']}@{m['queue_offset']}"
                  for cid, c in consumers.items() for m in json_lines(c) if m["msg_id"] in msg_ids)


def test_a_healthy_v2_passes_every_step_and_is_promoted_losing_nothing(cluster, graymq_process) -> None:
    consumers = start_group(cluster, graymq_process)
    ns = cluster.ns_url
    assert "retired" in graymq(ns, "gray", "retire", GROUP, "--reason", "held back").stdout
    wait_for(lambda: clients(ns)["v2a"] == ("RETIRED", []), 30, "v2a retired, holding nothing")
    load = producer(graymq_process, ns, 2500)
    code, report, progress = rollout(ns)
    assert (code, report["outcome"], report["state"]) == (0, "PROMOTED", "SUCCEEDED"), (report, progress)
    assert [(c["weight"], c["verdict"]) for c in report["checks"]] == [(25, "pass"), (50, "pass")]
    assert all(c["gray"]["consumed"] >= 20 and c["gray"]["failed"] == 0 for c in report["checks"])
    assert "step 1/2 weight 25%" in progress and "→ pass" in progress, progress
    assert "the gray side was retired: it consumes again" in progress, progress
    status = gray_status(ns, GROUP)
    assert status["gray_weight"] == 0 and not status["gray_retired"]
    assert {c["client_id"]: c["state"] for c in status["clients"] if c["role"] == "consumer"} == {
        "v1a": "NORMAL", "v1b": "NORMAL", "v2a": "NORMAL"}
    [op] = cluster.ns_call(lambda c: c.list_cutovers(GROUP))
    assert (op.kind, op.mode, op.state, op.result["outcome"]) == ("rollout", "promote", "SUCCEEDED",
                                                                               "PROMOTED")
    sent, accepted = settle(load, consumers)
    lost = set(sent) - set(accepted)
    duplicated = sum(n - 1 for n in accepted.values())
    print(f"healthy rollout: {len(sent)} sent, lost {len(lost)}, duplicated {duplicated}; checks "
          + ", ".join(f"{c['weight']}%: gray {c['gray']['consumed']} consumed" for c in report["checks"]))
    assert len(sent) == 2500 and not lost
    assert not duplicated, "\n".join(deliveries_of({m for m, n in accepted.items() if n > 1}, consumers))


def test_a_failing_v2_is_rolled_back_at_the_first_check_and_v1_consumes_everything(cluster, graymq_process) -> None:
    consumers = start_group(cluster, graymq_process, "--fail-rate", "0.5")
    ns = cluster.ns_url
    load = producer(graymq_process, ns, 1500)
    code, report, progress = rollout(ns)
    assert (code, report["outcome"], report["state"]) == (1, "ROLLED_BACK", "ABORTED"), (report, progress)
    [check] = report["checks"]
    assert check["weight"] == 25 and check["verdict"] == "fail" and "gray failure rate" in check["reasons"][0]
    assert check["normal"]["failed"] == 0
    assert report["safe_to_stop"] == ["v2a"] and "safe to stop: v2a" in report["message"]
    status = gray_status(ns, GROUP)
    v2a = next(c for c in status["clients"] if c["client_id"] == "v2a")
    assert (v2a["state"], v2a["queues"], status["gray_weight"], status["gray_retired"], status["orphan_policy"]) == (
        "RETIRED", [], 0, True, "adopt")
    assert status["health"]["gray"]["failed"] > 0
    human = graymq(ns, "gray", "status", GROUP).stdout
    assert "gray side RETIRED" in human and "gray side: consumed" in human, human
    accepted_by_v2 = len(json_lines(consumers["v2a"]))
    sent, accepted = settle(load, consumers)
    assert len(json_lines(consumers["v2a"])) == accepted_by_v2, "a retired consumer accepted messages"
    lost = set(sent) - set(accepted)
    duplicated = sum(n - 1 for n in accepted.values())
    print(f"failing rollout: {len(sent)} sent, v2 failed {check['gray']['failed']} in the check and accepted "
          f"{accepted_by_v2}; rolled back in {report['timings_s'].get('rollback')} s; lost {len(lost)}, duplicated "
          f"{duplicated}")
    assert len(sent) == 1500 and not lost
    assert not duplicated, "\n".join(deliveries_of({m for m, n in accepted.items() if n > 1}, consumers))


def test_an_interrupted_rollout_stays_running_and_the_same_command_resumes_it_as_it_started(
    cluster, graymq_process
) -> None:
    consumers = start_group(cluster, graymq_process)
    ns = cluster.ns_url
    load = producer(graymq_process, ns, 1500)
    args = ("gray", "rollout", GROUP, "--steps", "10,20", "--step-seconds", "1", "--min-messages", "5", "--then",
            "hold", "--json", "--nameserver", ns)
    first = graymq_process(*args, wait=False)
    first.wait_for_line("weight 10%", timeout=30)
    assert first.terminate() == 143, first.output[-2000:]  # 128 + SIGTERM
    assert "stays RUNNING" in first.output
    [running] = cluster.ns_call(lambda c: c.list_cutovers(GROUP, state="RUNNING"))
    assert (running.kind, running.mode) == ("rollout", "hold")
    code, report, progress = rollout(ns, "--then", "hold")  # resumed as recorded: 10,20 at 1 s, then hold
    assert (code, report["outcome"], report["resumed"], report["operation_id"]) == (0, "HELD", True, running.id)
    assert [c["weight"] for c in report["checks"]] == [10, 20] and "resuming" in progress
    assert gray_status(ns, GROUP)["gray_weight"] == 20  # held
    sent, accepted = settle(load, consumers)
    assert not set(sent) - set(accepted)


def test_rollout_arguments_out_of_range_are_refused_in_one_line(cluster) -> None:
    for args, says in ((["--steps", "5,0"], "--steps weights must be from 1 to 100"),
                       (["--steps", "5,x"], "--steps takes whole percents"),
                       (["--steps", "5", "--failed-checks", "0"], "--failed-checks")):
        result = graymq(cluster.ns_url, "gray", "rollout", GROUP, "--step-seconds", "1", *args, check=False)
        assert result.returncode == 2 and says in result.stderr.strip().splitlines()[-1], result.stderr


def test_a_group_without_gray_consumers_fails_at_once(cluster) -> None:
    cluster.add_broker("broker-a")
    cluster.ns_call(lambda ns: ns.set_switch(GROUP, True))
    result = graymq(cluster.ns_url, "gray", "rollout", GROUP, "--steps", "10", "--step-seconds", "1",
                    "--wait-for-gray", "1", "--json", check=False)  # the wait for one, as short as it may be
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert result.returncode == 1 and report["outcome"] == "FAILED" and "no live gray consumer" in report["message"]
