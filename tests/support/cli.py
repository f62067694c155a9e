"""Drive the ``graymq`` CLI as real processes: consumers and producers printing JSON lines."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from graymq.devkit.processes import GraymqProcess

# `graymq consume|produce` heartbeating the name server every 0.5 s instead of 5 s / 2 s: what waits on a client's
# report (its queues, its flip, its going stale) waits that much less. A test shrinking the name server's stale
# window (GRAYMQ_CLIENT_STALE_SECONDS) keeps it at least 3 of these.
FAST_HEARTBEAT = ("--heartbeat-interval", "0.5")


def json_lines(proc: GraymqProcess) -> list[dict[str, Any]]:
    """Every JSON object the process printed (its log lines are skipped)."""
    out = []
    for line in proc.output.splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def start_consumer(start: Callable[..., GraymqProcess], ns_url: str, group: str, client_id: str, topics: str,
                   tag: str = "*", *extra: str) -> GraymqProcess:
    proc = start("consume", topics, "--group", group, "--client-id", client_id, "--tag", tag, "--json",
                 "--nameserver", ns_url, *extra, wait=False)
    proc.wait_for_line("consuming", timeout=30)
    return proc


def produce(ns_url: str, topic: str, *args: str, env: dict[str, str] | None = None,
            timeout: float = 120) -> list[dict[str, Any]]:
    """Run ``graymq produce ... --json`` to completion; returns its send results (all must be SEND_OK)."""
    import os

    result = subprocess.run(
        [sys.executable, "-m", "graymq.gray_controller.cli", "produce", topic, "--json", "--nameserver", ns_url, *args],
        capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})},
    )
    sends = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert result.returncode == 0, f"produce failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    assert all(s["status"] == "SEND_OK" for s in sends), sends
    return sends


def graymq(ns_url: str, *args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    import os

    result = subprocess.run([sys.executable, "-m", "graymq.gray_controller.cli", *args, "--nameserver", ns_url],
                            capture_output=True, text=True, timeout=timeout,
                            env={**os.environ, "GRAYMQ_ADMIN_TOKEN": "dev-token"})
    if check:
        assert result.returncode == 0, f"graymq {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
    return result


def gray_status(ns_url: str, group: str) -> dict[str, Any]:
    return dict(json.loads(graymq(ns_url, "gray", "status", group, "--json").stdout))


def wait_for(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def held_queues(ns_url: str, group: str) -> dict[str, set[str]]:
    """client id -> the queues it reports holding (``broker:topic:queue``), read from the name server."""
    import httpx

    response = httpx.get(f"{ns_url.split(',')[0]}/v1/groups/{group}/clients", params={"role": "consumer"}, timeout=5)
    if response.status_code == 404:
        return {}
    response.raise_for_status()
    return {c["client_id"]: set(c["queues"]) for c in response.json()["clients"]}
