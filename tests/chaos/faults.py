"""Faults injected into real processes by PID, and into a stopped broker's store files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from graymq.broker_ext.store.layout import written_segment_size


def signal_pid(pid: int, sig: signal.Signals) -> float:
    """Send ``sig`` to ``pid``; returns the monotonic time it was sent."""
    os.kill(pid, sig)
    return time.monotonic()


def wait_exit(proc: subprocess.Popen[str], timeout: float) -> int:
    """Wait for ``proc`` to exit (SIGKILL after ``timeout``)."""
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(10)


def segment_of(store: Path, physical_offset: int) -> tuple[Path, int]:
    """The commit-log segment holding ``physical_offset`` and the position inside it (segments are sized alike:
    the first one tells the size)."""
    size = written_segment_size(store)
    assert size, f"{store} has no commit-log segment"
    start = physical_offset - physical_offset % size
    return store / "commitlog" / f"{start:020d}", physical_offset - start


def flip_byte(store: Path, physical_offset: int, at: int) -> None:
    """Invert one byte, ``at`` bytes into the record at ``physical_offset`` (past its size field, so the
    damage is a bad magic or a CRC mismatch)."""
    path, pos = segment_of(store, physical_offset)
    with open(path, "r+b") as f:
        f.seek(pos + at)
        byte = f.read(1)
        assert byte, f"{path} has no byte at {pos + at}"
        f.seek(pos + at)
        f.write(bytes([byte[0] ^ 0xFF]))


def truncate_at(store: Path, physical_offset: int) -> None:
    """Cut the segment holding ``physical_offset`` there: that record and every one after it are gone (a
    torn tail); the store reads the missing part of a short segment as zeros. Not the first segment: the
    store takes the segment size from it."""
    path, pos = segment_of(store, physical_offset)
    assert physical_offset >= (written_segment_size(store) or 0), "truncating the first segment"
    os.truncate(path, pos)


def verify_store(store: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """``graymq broker verify --store STORE --json`` (exit 0 clean, 1 damage found), ``env`` added to its
    environment."""
    result = subprocess.run([sys.executable, "-m", "graymq.gray_controller.cli", "broker", "verify", "--store",
                             str(store), "--json"], capture_output=True, text=True, timeout=120,
                            env={**os.environ, **(env or {})})
    assert result.returncode in (0, 1), f"verify failed ({result.returncode}): {result.stderr}"
    return dict(json.loads(result.stdout))
