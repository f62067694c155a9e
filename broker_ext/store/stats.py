"""Counters the broker exports as metrics."""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(slots=True)
class StoreStats:
    flush_count: int = 0  # commit-log flush rounds (one fdatasync per dirty segment each)
    flush_seconds_total: float = 0.0
    last_flush_ms: float = 0.0
    put_count: int = 0  # messages appended
    put_bytes: int = 0  # record bytes appended
    segments: int = 0  # commit-log segments on disk
    deleted_segments: int = 0  # removed by retention
    damaged_records: int = 0  # holes found by recovery and damaged records skipped by reads (each once)
    damaged_bytes: int = 0  # their bytes
    bad_units: int = 0  # consume-queue units a read found pointing at no record start of their offset (made holes)
    unflushed_bytes: int = 0  # appended to the commit log, not yet fsynced (as of the last append or flush)
    unflushed_since: float | None = None  # time.monotonic() of the oldest unflushed append; None: all flushed

    def unflushed_age_s(self, now: float | None = None) -> float:
        """Seconds the oldest unflushed append has waited for its fsync (0 when everything is flushed)."""
        if self.unflushed_since is None:
            return 0.0
        return max(0.0, (time.monotonic() if now is None else now) - self.unflushed_since)
