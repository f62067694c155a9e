"""The record of the commit log's holes: every damaged region the store has found, kept across restarts.

``store_dir/holes`` (JSON, written atomically) lists them by physical offset. Recovery and the read
path add what they find; a hole already listed is known, so it is logged at ERROR only the first time.
``graymq broker verify`` marks the holes it finds that are listed. Holes of segments deleted by
retention are forgotten.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from graymq.broker_ext.store.atomic_file import read_json, write_json_atomic
from graymq.broker_ext.store.log_scan import Hole

log = logging.getLogger(__name__)


class HoleLog:
    """Known holes by physical offset; ``save`` writes them when they changed (safe from a worker thread)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.holes: dict[int, Hole] = {}
        self._changed = False
        self._saving = threading.Lock()

    def load(self) -> None:
        """Read the file; an unreadable one is logged and replaced at the next save."""
        try:
            raw = read_json(self.path, {"holes": []})
            holes = [Hole(str(h["file"]), int(h["offset"]), int(h["length"]), str(h["reason"]),
                          int(h["physical_offset"])) for h in raw["holes"]]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.error("ignoring unreadable hole record %s (%s): holes found again are logged as new", self.path, exc)
            self._changed = True
            return
        self.holes = {h.physical_offset: h for h in holes}

    def add(self, hole: Hole) -> bool:
        """Record ``hole``; whether it was new."""
        if hole.physical_offset in self.holes:
            return False
        self.holes[hole.physical_offset] = hole
        self._changed = True
        return True

    def keep_confirmed(self, confirmed: list[Hole]) -> list[Hole]:
        """Drop the holes lying in none of ``confirmed`` (a full scan's); returns the dropped ones."""
        dropped = [h for h in self.holes.values() if not any(
            c.physical_offset <= h.physical_offset < c.physical_offset + max(c.length, 1) for c in confirmed)]
        for hole in dropped:
            del self.holes[hole.physical_offset]
            self._changed = True
        return dropped

    def forget_below(self, physical_offset: int) -> None:
        """Drop holes of deleted segments (below the commit log's min offset)."""
        for offset in [o for o in self.holes if o < physical_offset]:
            del self.holes[offset]
            self._changed = True

    def save(self) -> None:
        with self._saving:
            if not self._changed:
                return
            self._changed = False
            holes = sorted(list(self.holes.values()), key=lambda h: h.physical_offset)
            try:
                write_json_atomic(self.path, {"holes": [h.to_json() for h in holes]})
            except BaseException:
                self._changed = True
                raise

    def to_json(self) -> list[dict[str, Any]]:
        return [h.to_json() for h in sorted(self.holes.values(), key=lambda h: h.physical_offset)]
