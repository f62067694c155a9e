"""Run the stock RocketMQ 5 Python SDK (``stock_sdk_driver.py``) in its own process and read what it printed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

DRIVER = Path(__file__).with_name("stock_sdk_driver.py")


def sdk_send(endpoint: str, topic: str, messages: list[dict[str, Any]], home: Path, *, ak: str = "",
             sk: str = "", timeout: float = 60.0) -> list[dict[str, Any]]:
    """Send ``messages`` with the SDK's Producer; one result per message (``message_id``/``offset`` or ``error``),
    or a single ``startup_error``. ``home`` takes the SDK's log files."""
    spec = {"endpoint": endpoint, "topic": topic, "messages": messages, "ak": ak, "sk": sk}
    done = subprocess.run([sys.executable, str(DRIVER), json.dumps(spec)], capture_output=True, text=True,
                          timeout=timeout, env={"HOME": str(home), "PATH": "/usr/bin:/bin"})
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert results, f"the SDK driver printed nothing (exit {done.returncode}): {done.stderr[-2000:]}"
    return results


def sdk_log(home: Path) -> str:
    """What the SDK logged under ``home`` (the reasons of refused calls are there, not in its exceptions)."""
    return "".join(p.read_text() for p in sorted((home / "logs").rglob("*.log")))
