"""A server whose port is taken says so in one line naming the port and the process holding it — no traceback —
for the broker, the name server and `graymq up`, on real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

_HOLD = "import socket, sys, time; s = socket.create_server(('0.0.0.0', 0)); print(s.getsockname()[1], flush=True); " \
        "time.sleep(120)"


@pytest.fixture
def held_port() -> Iterator[tuple[int, int]]:
    """A port some other process listens on, and that process's pid."""
    holder = subprocess.Popen([sys.executable, "-c", _HOLD], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        yield int(holder.stdout.readline()), holder.pid
    finally:
        holder.kill()
        holder.wait()


def graymq(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GRAYMQ_DEV_MODE": "true"}
    return subprocess.run([sys.executable, "-m", "graymq.gray_controller.cli", *args], capture_output=True,
                          text=True, timeout=90, cwd=cwd, env=env)


def _expected(port: int, pid: int) -> str:
    return f"port {port} is already in use (held by pid {pid} ("


def test_a_broker_on_a_taken_port_names_it_and_its_holder_in_one_line(held_port, tmp_path) -> None:
    port, pid = held_port
    result = graymq(tmp_path, "broker", "--dev", "--name", "broker-a", "--port", str(port), "--store",
                    str(tmp_path / "store"), "--nameserver", "http://127.0.0.1:9")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr, result.stderr
    [line] = result.stderr.strip().splitlines()  # the one line: not after the store's loading lines
    assert line.startswith(f"graymq broker: cannot listen on 127.0.0.1:{port}: ") and _expected(port, pid) in line


def test_a_name_server_on_a_taken_port_names_it_and_its_holder(held_port, tmp_path) -> None:
    port, pid = held_port
    result = graymq(tmp_path, "nameserver", "--dev", "--port", str(port), "--db", f"sqlite:///{tmp_path}/ns.db",
                    "--migrate")
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    [line] = result.stderr.strip().splitlines()  # the one line: no start-up warning (dev mode) before it
    assert line.startswith("graymq nameserver: ") and _expected(port, pid) in line, result.stderr


def test_up_on_a_taken_broker_port_says_which_port_and_who_holds_it(held_port, tmp_path) -> None:
    port, pid = held_port
    result = graymq(tmp_path, "up", "--data", str(tmp_path / "data"), "--nameserver-port", "0", "--broker-port",
                    str(port), "--grpc-port", "0")
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    assert _expected(port, pid) in result.stderr, result.stderr
