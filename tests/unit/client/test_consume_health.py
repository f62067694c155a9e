"""A consumer's health per side: counters that only grow, latency percentiles over a window."""

from __future__ import annotations

import pytest

from graymq.client.consumer.health import ConsumeHealth
from graymq.protocol.health import MAX_LANES

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


def test_the_gray_side_is_also_kept_per_lane_and_reported_under_lanes() -> None:
    health = ConsumeHealth(window_s=60, clock=Clock())
    assert "lanes" not in health.report()  # nothing consumed in a lane: the report a name server before lanes reads
    health.consumed(gray=True, count=3, seconds=0.004, lane="v3")
    health.failed(gray=True, count=1, seconds=0.002, lane="v3")
    health.sent_back(gray=True, count=1, dead_lettered=0, lane="v3")
    health.consumed(gray=True, count=2, seconds=0.001)  # a gray consumer naming no lane: the ``gray`` lane
    health.consumed(gray=False, count=5, seconds=0.001, lane=None)
    report = health.report()
    assert (report["gray"]["consumed"], report["gray"]["failed"], report["normal"]["consumed"]) == (5, 1, 5)
    assert {lane: (f["consumed"], f["failed"], f["sent_back"]) for lane, f in report["lanes"].items()} == {
        "v3": (3, 1, 1), "gray": (2, 0, 0)}
    assert report["lanes"]["v3"]["p99_ms"] == 4.0


def test_only_the_lanes_consumed_in_last_are_kept() -> None:
    health = ConsumeHealth(window_s=60, clock=Clock())
    lanes = [f"v{n}" for n in range(MAX_LANES)]
    for lane in [*lanes, "v0", "new1", "new2"]:  # v0, the first, consumed in again before two new lanes
        health.consumed(gray=True, count=1, seconds=0.001, lane=lane)
    kept = health.report()["lanes"]
    assert len(kept) == MAX_LANES and kept["v0"]["consumed"] == 2 and "v1" not in kept and "v2" not in kept
    assert health.report()["gray"]["consumed"] == MAX_LANES + 3
