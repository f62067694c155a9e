"""How a consumer's listener is doing, per side (gray or normal: the consumer's flag when it consumed):
messages consumed and failed, sent back and dead-lettered, and consume latency.

Counters only grow, so whoever reads two reports (the rollout controller, ``gray status``) takes their
difference for the interval between them; latency percentiles cover the last ``window_s`` seconds.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from graymq.protocol.health import SIDES


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

    def consumed(self, gray: bool, count: int, seconds: float) -> None:
        """A batch of ``count`` the listener accepted after ``seconds`` in it."""
        side = self._sides["gray" if gray else "normal"]
        side.consumed += count
        side.latencies.append((self._clock(), seconds))

    def failed(self, gray: bool, count: int, seconds: float) -> None:
        side = self._sides["gray" if gray else "normal"]
        side.failed += count
        side.latencies.append((self._clock(), seconds))

    def sent_back(self, gray: bool, count: int, dead_lettered: int) -> None:
        """``count`` failed messages sent back, ``dead_lettered`` of them out of retries."""
        side = self._sides["gray" if gray else "normal"]
        side.sent_back += count
        side.dead_lettered += dead_lettered

    def report(self) -> dict[str, dict[str, Any]]:
        """Per side: the counters, and p50/p99 consume latency (ms) over the window."""
        since = self._clock() - self.window_s
        out: dict[str, dict[str, Any]] = {}
        for name, side in self._sides.items():
            recent = sorted(seconds for when, seconds in side.latencies if when >= since)
            out[name] = {"consumed": side.consumed, "failed": side.failed, "sent_back": side.sent_back,
                         "dead_lettered": side.dead_lettered,
                         "p50_ms": round(percentile(recent, 0.50) * 1000, 3),
                         "p99_ms": round(percentile(recent, 0.99) * 1000, 3)}
        return out
