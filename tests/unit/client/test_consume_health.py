"""A consumer's health per side: counters that only grow, latency percentiles over a window."""

from __future__ import annotations

import pytest

from graymq.client.consumer.health import ConsumeHealth

pytestmark = pytest.mark.unit


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_counters_and_latency_are_kept_per_side() -> None:
    clock = Clock()
    health = ConsumeHealth(window_s=60, clock=clock)
    for ms in range(1, 101):
        health.consumed(gray=True, count=1, seconds=ms / 1000)
    health.failed(gray=True, count=2, seconds=0.5)
    health.sent_back(gray=True, count=2, dead_lettered=1)
    health.consumed(gray=False, count=10, seconds=0.002)
    report = health.report()
    assert {k: report["gray"][k] for k in ("consumed", "failed", "sent_back", "dead_lettered")} == {
        "consumed": 100, "failed": 2, "sent_back": 2, "dead_lettered": 1}
    assert (report["gray"]["p50_ms"], report["gray"]["p99_ms"]) == (51.0, 100.0)  # nearest rank of 101
    assert report["normal"] == {"consumed": 10, "failed": 0, "sent_back": 0, "dead_lettered": 0, "p50_ms": 2.0,
                                "p99_ms": 2.0}


def test_latency_percentiles_cover_only_the_window() -> None:
    clock = Clock()
    health = ConsumeHealth(window_s=60, clock=clock)
    health.consumed(gray=False, count=1, seconds=9.0)
    clock.now += 61
    health.consumed(gray=False, count=1, seconds=0.001)
    report = health.report()["normal"]
    assert (report["consumed"], report["p99_ms"]) == (2, 1.0)
