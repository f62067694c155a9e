"""Crash-safe small files (checkpoint, topic config, consumer offsets, subscription groups).

``write_atomic`` writes a temporary file in the target's directory, fsyncs it, renames it over
the target with ``os.replace`` and fsyncs the directory, so after a crash the target holds
either the old or the new content, never a mix.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def fsync_dir(directory: Path) -> None:
    """Make a rename or unlink inside ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: temp file in the same directory → write → fsync → replace → fsync dir."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def read_json(path: Path, default: Any) -> Any:
    """The JSON document at ``path``, or ``default`` when the file does not exist."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        return default
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"{path}: not a valid JSON document: {exc}") from exc


def json_bytes(obj: Any) -> bytes:
    """``obj`` as the JSON these files hold."""
    return json.dumps(obj, indent=1).encode("utf-8")


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write ``obj`` as JSON to ``path`` with ``write_atomic``."""
    write_atomic(path, json_bytes(obj))
