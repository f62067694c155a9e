"""`graymq consume` says at start what stops it: an unreachable name server, a topic that does not exist (waited
for only with --wait-for-topic), a group the token may not consume — one line each and exit 1, on real processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import graymq
from tests.support.trust import StartProcess, add_principal, cli, start_secure_broker, start_secure_nameserver

pytestmark = pytest.mark.integration

DEAD = "http://127.0.0.1:9"  # nothing listens there


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


def test_an_unreachable_name_server_is_one_error_line_and_exit_1() -> None:
    result = subprocess.run([sys.executable, "-m", "graymq.gray_controller.cli", "consume", "T", "--group", "G",
                             "--nameserver", DEAD], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stderr
    [line] = _error_lines(result.stderr)
    assert line.startswith("graymq consume: ERROR cannot reach the name server") and DEAD in line
    assert "consuming" not in result.stderr


def test_a_missing_topic_is_one_error_line_unless_waited_for(graymq_process: StartProcess,
                                                              tmp_path: Path) -> None:
    up = graymq_process("up", "--data", str(tmp_path / "data"), "--nameserver-port", "0", "--broker-port", "0",
                        "--grpc-port", "off", timeout=90)
    ns_url = str(up.ready_info["nameserver"])
    missing = graymq(ns_url, "consume", "NO_SUCH_TOPIC", "--group", "G", check=False, timeout=60)
    assert missing.returncode == 1, missing.stderr
    [line] = _error_lines(missing.stderr)
    assert line == ("graymq consume: ERROR topic NO_SUCH_TOPIC does not exist: create it (graymq topic create) "
                    "or pass --wait-for-topic")

    waiting = graymq_process("consume", "LATE_TOPIC", "--group", "G", "--from", "first", "--max", "1",
                             "--wait-for-topic", "--nameserver", ns_url, wait=False)
    waiting.wait_for_line("waiting for topic LATE_TOPIC", timeout=30)
    graymq(ns_url, "topic", "create", "LATE_TOPIC", "--queues", "2")
    waiting.wait_for_line("consuming LATE_TOPIC", timeout=30)
    graymq(ns_url, "produce", "LATE_TOPIC", "--body", "hello")
    assert waiting.proc.wait(timeout=60) == 0
    assert "hello" in waiting.output


def test_a_group_the_token_may_not_consume_is_one_error_line_and_exit_1(
    graymq_process: StartProcess, fresh_pg_url: str, tmp_path: Path
) -> None:
    ns_url = start_secure_nameserver(graymq_process, fresh_pg_url)
    start_secure_broker(graymq_process, ns_url, "broker-a", add_principal(ns_url, "broker-a", "--broker"),
                        tmp_path / "broker-a")
    assert cli(ns_url, "topic", "create", "ORDER_PAID", "--queues", "2").returncode == 0
    token = add_principal(ns_url, "billing-app", "--consume", "billing:ORDER_*")
    result = cli(ns_url, "consume", "ORDER_PAID", "--group", "shipping", "--idle-exit", "20", token=token,
                 admin=None, timeout=60)
    assert result.returncode == 1, result.stderr
    [line] = _error_lines(result.stderr)
    assert line.startswith("graymq consume: ERROR ") and "FORBIDDEN: principal billing-app may not consume group " \
        "shipping" in line, result.stderr

