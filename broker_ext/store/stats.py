"""Counters the broker exports as metrics."""

from __future__ import annotations

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
