"""Retention: when the oldest commit-log segment may be deleted.

It goes when it is older than ``retention_hours`` (by last modification: a segment is not written
after it is sealed) or, whatever its age, while disk use is above ``disk_warn_ratio``. Never the
active (last) segment, never one not fully flushed. Above ``disk_critical_ratio`` the store refuses
writes instead (``MessageStore.put_messages``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from graymq.broker_ext.store.mapped_file import MappedFile


def disk_usage(path: Path) -> float:
    """Used fraction of the file system holding ``path``."""
    usage = shutil.disk_usage(path)
    return usage.used / usage.total if usage.total else 0.0


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    retention_hours: float
    disk_warn_ratio: float

    def reason_to_delete_oldest(
        self, segments: Sequence[MappedFile], flushed_offset: int, now: float, disk_ratio: Callable[[], float]
    ) -> str | None:
        """Why the oldest segment should be deleted now, or ``None`` to keep it."""
        if len(segments) < 2 or segments[0].end > flushed_offset:
            return None
        age_hours = (now - os.stat(segments[0].path).st_mtime) / 3600
        if age_hours >= self.retention_hours:
            return f"{age_hours:.1f} h old, retention is {self.retention_hours} h"
        ratio = disk_ratio()
        if ratio > self.disk_warn_ratio:
            return f"disk usage {ratio:.1%} above the {self.disk_warn_ratio:.0%} watermark"
        return None
