"""Start ``graymq`` server commands as real subprocesses and wait until they are ready.

Every server command prints one line ``graymq-ready {json}`` on stdout once it serves
(the JSON names its address); the helper waits for it with a deadline and, when the
process dies or the deadline passes, raises with the process's output attached.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

READY_PREFIX = "graymq-ready "
REPO_ROOT = Path(__file__).resolve().parents[2]


class ProcessFailed(RuntimeError):
    pass


class GraymqProcess:
    """A running ``graymq ...`` command with its output captured line by line; ``prefix`` runs it under another
    command that execs it (``ip netns exec NS``: the pid stays the command's)."""

    def __init__(self, args: Sequence[str], env: dict[str, str] | None = None, cwd: Path | None = None,
                 prefix: Sequence[str] = ()) -> None:
        self.args = list(args)
        full_env = dict(os.environ)
        full_env.update(env or {})
        full_env.setdefault("PYTHONUNBUFFERED", "1")
        self.lines: list[str] = []
        self.ready_info: dict[str, Any] | None = None
        self._ready = threading.Event()
        self._lock = threading.Lock()
        self.proc = subprocess.Popen(
            [*prefix, sys.executable, "-m", "graymq.gray_controller.cli", *self.args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=full_env, cwd=str(cwd or REPO_ROOT), text=True, bufsize=1,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            with self._lock:
                self.lines.append(line)
            if line.startswith(READY_PREFIX) and self.ready_info is None:
                self.ready_info = json.loads(line[len(READY_PREFIX):])
                self._ready.set()
        self._ready.set()

    @property
    def output(self) -> str:
        with self._lock:
            return "\n".join(self.lines)

    def wait_ready(self, timeout: float = 30.0) -> dict[str, Any]:
        self._ready.wait(timeout)
        if self.ready_info is None:
            code = self.proc.poll()
            state = f"exited with {code}" if code is not None else f"not ready after {timeout}s"
            self.kill()
            raise ProcessFailed(f"graymq {' '.join(self.args)} {state}; output:\n{self.output}")
        return self.ready_info

    @property
    def address(self) -> str:
        assert self.ready_info is not None
        return str(self.ready_info["address"])

    def wait_for_line(self, needle: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                for line in self.lines:
                    if needle in line:
                        return line
            if self.proc.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.05)
        raise ProcessFailed(f"{needle!r} not seen from graymq {' '.join(self.args)}; output:\n{self.output}")

    def terminate(self, timeout: float = 20.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(5)
        return int(self.proc.returncode)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(5)

    def __enter__(self) -> GraymqProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.terminate()
