"""The `graymq` CLI contract: topic, gray switch/flag/rule/status, produce/consume, and clear errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.cli import graymq, json_lines, produce, start_consumer, wait_for

pytestmark = pytest.mark.integration


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([sys.executable, "-m", "graymq.gray_controller.cli", *args], capture_output=True, text=True,
                          timeout=60, env={**os.environ, **(env or {})})


@pytest.mark.parametrize(("args", "message"), [
    (["topic", "create", "T", "--queues", "4", "--gray-queues", "5", "--nameserver", "http://127.0.0.1:9"],
     "exceeds queue_nums"),
    (["consume", "T", "--group", "G", "--from", "yesterday", "--nameserver", "http://127.0.0.1:9"], "--from"),
    (["consume", "T", "--group", "G", "--label", "novalue", "--nameserver", "http://127.0.0.1:9"], "k=v"),
    (["produce", "T", "--body", "x", "--count", "2", "--nameserver", "http://127.0.0.1:9"], "not both"),
    (["topic", "list", "--nameserver", "ftp://x"], "must start with http"),
    (["broker", "--port", "70000"], "invalid broker settings"),
])
def test_wrong_arguments_exit_2_with_a_clear_message(args, message):
    result = run_cli(*args)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_command_and_missing_arguments_are_usage_errors():
    assert run_cli("frobnicate").returncode == 2
    result = run_cli("consume", "T")
    assert result.returncode == 2 and "--group" in result.stderr


def test_dead_name_server_is_a_clear_error_not_a_traceback():
    result = run_cli("gray", "status", "G", "--nameserver", "http://127.0.0.1:9")
    assert result.returncode == 1
    assert "failed on every name server" in result.stderr and "Traceback" not in result.stderr


def test_help_lists_only_commands_that_exist():
    out = run_cli("--help").stdout
    for command in ("nameserver", "broker", "up", "topic", "produce", "consume", "gray"):
        assert command in out


def test_topic_gray_and_status_commands(cluster, graymq_process):
    cluster.add_broker("broker-a")
    ns = cluster.ns_url
    created = graymq(ns, "topic", "create", "TOPIC_CLI", "--queues", "6", "--gray-queues", "2")
    assert "gray queues [0, 5]" in created.stdout
    wait_for(lambda: "broker-a" in graymq(ns, "topic", "route", "TOPIC_CLI", check=False).stdout, 20, "route")
    route = json.loads(graymq(ns, "topic", "route", "TOPIC_CLI", "--json").stdout)
    assert route["brokers"][0]["gray_queues"] == [0, 5]
    assert any(t["topic"] == "TOPIC_CLI" for t in json.loads(graymq(ns, "topic", "list", "--json").stdout))

    graymq(ns, "gray", "rule", "G", "--label", "version=v2", "on")
    v2 = start_consumer(graymq_process, ns, "G", "c-v2", "TOPIC_CLI", "*", "--label", "version=v2")
    v1 = start_consumer(graymq_process, ns, "G", "c-v1", "TOPIC_CLI", "*", "--label", "version=v1")
    wait_for(lambda: {c["client_id"]: c["gray"] for c in json.loads(
        graymq(ns, "gray", "status", "G", "--json").stdout)["clients"]} == {"c-v1": False, "c-v2": True}, 20,
        "rule-based flags")
    sends = produce(ns, "TOPIC_CLI", "--gray", "--count", "3", "--tag", "T1", "--key", "k1")
    assert {s["queue_id"] for s in sends} <= {0, 5} and all(s["gray"] for s in sends)
    wait_for(lambda: len(json_lines(v2)) == 3, 20, "gray messages at the gray consumer")
    message = json_lines(v2)[0]
    assert message["tags"] == "T1" and message["keys"] == ["k1"] and message["gray"] and message["client_id"] == "c-v2"
    wait_for(lambda: "gray backlog: 0" in graymq(ns, "gray", "status", "G").stdout, 20,
             "consumed offsets committed (they are persisted every second)")
    assert "c-v2" in graymq(ns, "gray", "status", "G").stdout

    graymq(ns, "gray", "flag", "G", "c-v2", "off", "--reason", "promote by hand")
    wait_for(lambda: not [c for c in json.loads(graymq(ns, "gray", "status", "G", "--json").stdout)["clients"]
                          if c["gray"]], 20, "c-v2 to drain and flip")
    graymq(ns, "gray", "rule", "G", "--label", "version=v2", "off")
    assert "no rule" in graymq(ns, "gray", "rule", "G", "--label", "version=v2", "off", check=False).stderr
    graymq(ns, "gray", "switch", "G", "off")
    assert json.loads(graymq(ns, "gray", "status", "G", "--json").stdout)["gray_switch"] is False
    assert v1.terminate() == 0 and v2.terminate() == 0
    audit = cluster.ns_call(lambda c: c.request("GET", "/v1/audit", params={"group": "G"}))
    assert any(a["reason"] == "promote by hand" and a["actor"] == "dev" for a in audit)
