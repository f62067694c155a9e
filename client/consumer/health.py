"""How a consumer's listener is doing, per side (gray or normal: the consumer's flag when it consumed):
messages consumed and failed, sent back and dead-lettered, and consume latency. The gray side is also kept per lane
(the consumer's lane then; ``gray`` when it names none), reported under ``lanes`` for the name server's per-lane
metrics, the ``MAX_LANES`` consumed in last.

Counters only grow, so whoever reads two reports (the rollout controller, ``gray status``) takes their
difference for the interval between them; latency percentiles cover the last ``window_s`` seconds.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from graymq.protocol.health import GRAY, MAX_LANES, SIDES


@dataclass
class _Side:
    consumed: int = 0  # messages the listener accepted
    failed: int = 0  # deliveries the listener failed (an exception or reconsume-later)
    sent_back: int = 0  # failed messages sent back for a later retry
    dead_lettered: int = 0  # failed messages out of retries, moved to the dead-letter queue
    latencies: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=4096))  # (when, seconds)


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile of sorted ``values`` (0.0 when empty).

    >>> percentile([1.0, 2.0, 3.0, 4.0], 0.5), percentile([1.0, 2.0, 3.0, 4.0], 0.99), percentile([], 0.5)
    (2.0, 4.0, 0.0)
    """
    if not values:
        return 0.0
    rank = max(1, -(-len(values) * fraction // 1))
    return values[int(rank) - 1]


class ConsumeHealth:
    def __init__(self, window_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.window_s = window_s
        self._clock = clock
        self._sides = {side: _Side() for side in SIDES}
        self._lanes: dict[str, _Side] = {}  # the gray side per lane, the one consumed in last at the end

    def _of(self, gray: bool, lane: str | None) -> tuple[_Side, ...]:
        """What one outcome counts in: the normal side, or the gray side and its lane's share."""
        if not gray:
            return (self._sides["normal"],)
        name = lane or GRAY
        share = self._lanes.pop(name, None) or _Side()
        self._lanes[name] = share
        if len(self._lanes) > MAX_LANES:
            del self._lanes[next(iter(self._lanes))]
        return self._sides[GRAY], share

    def consumed(self, gray: bool, count: int, seconds: float, lane: str | None = None) -> None:
        """A batch of ``count`` the listener accepted after ``seconds`` in it (``lane``: the consumer's then)."""
        for side in self._of(gray, lane):
            side.consumed += count
            side.latencies.append((self._clock(), seconds))

    def failed(self, gray: bool, count: int, seconds: float, lane: str | None = None) -> None:
        for side in self._of(gray, lane):
            side.failed += count
            side.latencies.append((self._clock(), seconds))

    def sent_back(self, gray: bool, count: int, dead_lettered: int, lane: str | None = None) -> None:
        """``count`` failed messages sent back, ``dead_lettered`` of them out of retries."""
        for side in self._of(gray, lane):
            side.sent_back += count
            side.dead_lettered += dead_lettered

    def report(self) -> dict[str, Any]:
        """Per side: the counters, and p50/p99 consume latency (ms) over the window; ``lanes``: the same per lane of
        the gray side (left out while the consumer consumed in none)."""
        since = self._clock() - self.window_s
        out: dict[str, Any] = {name: _figures(side, since) for name, side in self._sides.items()}
        if self._lanes:
            out["lanes"] = {name: _figures(side, since) for name, side in self._lanes.items()}
        return out


def _figures(side: _Side, since: float) -> dict[str, Any]:
    recent = sorted(seconds for when, seconds in side.latencies if when >= since)
    return {"consumed": side.consumed, "failed": side.failed, "sent_back": side.sent_back,
            "dead_lettered": side.dead_lettered, "p50_ms": round(percentile(recent, 0.50) * 1000, 3),
            "p99_ms": round(percentile(recent, 0.99) * 1000, 3)}
