"""The README's TLS commands run as written: a throwaway CA, a name server and a broker over TLS, and clients
trusting them through GRAYMQ_TLS_CA."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from tests.docs.test_readme_commands import ROOT, bash_block, run_block

pytestmark = pytest.mark.e2e

# What a person waits for after starting a server in the background: its https endpoint answering.
_WAIT = """
import sys, time, httpx
from graymq.protocol.tls import client_context
url, ca, expected = sys.argv[1:4]
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    try:
        answer = httpx.get(url, verify=client_context(ca), timeout=2)
        if answer.status_code == 200 and expected in answer.text:
            sys.exit(0)
    except httpx.HTTPError:
        pass
    time.sleep(0.2)
sys.exit(f"gave up waiting for {url}")
"""


def wait_line(path: str, expected: str = "") -> str:
    return " ".join(shlex.quote(word) for word in (
        sys.executable, "-c", _WAIT, f"https://127.0.0.1:9876{path}", "ca.crt", expected))


def test_the_tls_commands_run_as_written(tmp_path: Path) -> None:
    lines = ["source .venv/bin/activate"]  # as in "Try it by hand"
    for line in bash_block(ROOT / "README.md", "### TLS"):
        lines.append(line)
        if " graymq nameserver " in f" {line} ":
            lines.append(wait_line("/readyz"))
        elif " graymq broker " in line:
            lines.append(wait_line("/v1/brokers", "broker-a"))
    output = run_block(tmp_path, lines)
    assert "name server listening on 127.0.0.1:9876 over TLS" in output
    assert "broker broker-a serving on 127.0.0.1:10911 over TLS" in output
    assert "served by broker-a" in output and "SEND_OK" in output
    consumed = [line for line in output.splitlines() if line.startswith("broker-a:ORDERS:")]
    assert len(consumed) == 1 and consumed[0].endswith(" hello"), output[-3000:]
