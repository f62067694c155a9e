"""The stock Python SDK's SimpleConsumer (``stock_sdk_consumer_driver.py``) in its own process, one command at a
time: receive, ack, change invisible duration."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from tests.support.stock_sdk import _env

DRIVER = Path(__file__).with_name("stock_sdk_consumer_driver.py")


class DrivenSimpleConsumer:
    """``receive``, ``call`` (any driver command) and ``close``; ``started`` is the driver's first line."""

    def __init__(self, endpoint: str, group: str, topic: str, home: Path, *, await_s: int = 2, tags: str = "*"
                 ) -> None:
        spec = {"endpoint": endpoint, "group": group, "topic": topic, "await": await_s, "tags": tags}
        self.proc = subprocess.Popen([sys.executable, str(DRIVER), json.dumps(spec)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=_env(home))
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.started = self._answer(60.0)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put("")

    def _answer(self, timeout: float) -> dict[str, Any]:
        line = self._lines.get(timeout=timeout)
        assert line, f"the SDK consumer driver exited ({self.proc.poll()}) before answering"
        return dict(json.loads(line))

    def call(self, command: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        return self._answer(timeout)

    def receive(self, max_messages: int = 32, invisible_s: int = 10, *, ack: bool = False) -> list[dict[str, Any]]:
        answer = self.call({"receive": max_messages, "invisible": invisible_s, "ack": ack})
        assert "messages" in answer, answer
        return list(answer["messages"])

    def close(self) -> None:
        if self.proc.poll() is None and self.proc.stdin is not None:
            try:
                self.proc.stdin.write("\n")
                self.proc.stdin.flush()
                self.proc.wait(20)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
