"""The last minutes of each group's consume health, per side (normal, gray and each other lane), for the console's
charts.

A sampler reads the live consumers' reports (``protocol.health``: counters since each client started, p99 of its
recent window) every ``health_sample_seconds`` and turns them into points: deliveries per second, failure rate and
p99 over a trailing window of ``WINDOW_S`` (clients report every 5 s by default: a shorter window would show their
reports' rhythm, not the traffic). ``protocol.health.since`` takes each client's difference, so a restarted or a
departed client does not make the figures jump.

The history is kept in memory, per name server process, bounded to ``KEPT_S`` per group and side, and lost on a
restart: it is a view of the recent minutes, not a record (Prometheus keeps the long series from ``/metrics``), and
storing a point per group every few seconds in the database would be write load for nothing a restart needs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from graymq.nameserver.clock import utc_now
from graymq.nameserver.gray_policy import GRAY_LANE, lane_of
from graymq.nameserver.repositories.clients import ClientRepository
from graymq.protocol.health import SIDES, empty_side, failure_rate, since

log = logging.getLogger(__name__)

KEPT_S = 900.0  # 15 minutes of points per group and side
WINDOW_S = 10.0  # each point covers what the clients did in the last WINDOW_S

Reports = dict[str, dict[str, Any] | None]  # client id -> its latest health report


@dataclass(frozen=True, slots=True)
class HealthPoint:
    """One side of one group at ``at`` (epoch seconds), over the trailing window."""

    at: float
    per_second: float  # deliveries (accepted + failed) per second
    failure_rate: float  # percent of deliveries
    p99_ms: float
    deliveries: int


class HealthHistory:
    """Per group and side, a bounded ring of points (thread-safe: read by request threads, fed by the sampler).

    >>> h = HealthHistory(sample_s=5.0)
    >>> h.add({"G": {"c1": {"gray": {"consumed": 0}}}}, at=100.0)
    >>> h.add({"G": {"c1": {"gray": {"consumed": 45, "failed": 5, "p99_ms": 7.5}}}}, at=105.0)
    >>> h.series("G")["gray"][-1]
    {'at': 105.0, 'per_second': 10.0, 'failure_rate': 10.0, 'p99_ms': 7.5, 'deliveries': 50}
    >>> h.series("G")["normal"][-1]["deliveries"], h.series("unknown")
    (0, {'gray': [], 'normal': []})
    """

    def __init__(self, sample_s: float) -> None:
        self.sample_s = sample_s
        kept = int(KEPT_S / sample_s) + 1
        self._points: dict[str, dict[str, deque[HealthPoint]]] = {}
        self._samples: dict[str, deque[tuple[float, Reports]]] = {}  # the raw reports of the last window
        self._reported: dict[str, float] = {}  # when each group last had a live client's report
        self._kept = kept
        self._lock = threading.Lock()

    def add(self, reports: Mapping[str, Reports], at: float) -> None:
        """A sample: every group's live clients' reports at ``at``; a known group with none left gets zero points,
        one without a report for ``KEPT_S`` is forgotten. The figures are worked out outside the lock."""
        with self._lock:
            self._reported.update((group, at) for group in reports)
            for group in [g for g, seen in self._reported.items() if seen <= at - KEPT_S]:
                del self._reported[group], self._samples[group], self._points[group]
            windows: dict[str, tuple[tuple[float, Reports], tuple[float, Reports]]] = {}
            for group in self._reported:
                samples = self._samples.setdefault(group, deque())
                samples.append((at, dict(reports.get(group) or {})))
                while len(samples) > 2 and samples[1][0] <= at - WINDOW_S:
                    samples.popleft()
                if len(samples) > 1:
                    windows[group] = (samples[0], samples[-1])
        figures = {group: (at - then, lane_sides(before, after))
                   for group, ((then, before), (_, after)) in windows.items()}
        with self._lock:
            for group, (seconds, sides) in figures.items():
                kept = self._points.setdefault(group, {side: deque(maxlen=self._kept) for side in SIDES})
                for side in sorted(set(kept) | set(sides)):  # a lane once seen goes on with zero points
                    ring = kept.setdefault(side, deque(maxlen=self._kept))
                    ring.append(_point(sides.get(side) or empty_side(), at, seconds))

    def series(self, group: str) -> dict[str, list[dict[str, float]]]:
        """``{"gray": [point, ...], "normal": [...], LANE: [...]}``, oldest first: ``normal`` and ``gray`` always
        (empty lists for a group never seen), another lane from its first sample on."""
        with self._lock:
            points = self._points.get(group) or {}
            kept = {side: list(points.get(side, ())) for side in sorted(set(SIDES) | set(points))}
        return {side: [asdict(p) for p in side_points] for side, side_points in kept.items()}


def lane_sides(before: Reports, after: Reports) -> dict[str, dict[str, float]]:
    """What the clients did between two readings (``since``), per side: ``normal``, and each lane's figures from
    the clients in it at ``after`` (a report's ``lane``; one in no lane counts under ``gray``, as before lanes: its
    lane counters stand still once it left its lane). A client's report counts its lane consumption as ``gray``.

    >>> a = {"c1": {"gray": {"consumed": 5}, "lane": "v3"}, "c2": {"gray": {"consumed": 1}}}
    >>> b = {"c1": {"gray": {"consumed": 9}, "lane": "v3"}, "c2": {"gray": {"consumed": 3}, "normal": {"failed": 1}}}
    >>> {side: figures["consumed"] + figures["failed"] for side, figures in lane_sides(a, b).items()}
    {'normal': 1, 'gray': 2, 'v3': 4}
    """
    in_lane = {client: str((report or {}).get("lane") or GRAY_LANE) for client, report in after.items()}
    sides = {"normal": since(before, after)["normal"]}
    for lane in sorted({GRAY_LANE, *in_lane.values()}, key=lambda name: (name != GRAY_LANE, name)):
        sides[lane] = since(before, {c: r for c, r in after.items() if in_lane[c] == lane})["gray"]
    return sides


def _point(figures: dict[str, float], at: float, seconds: float) -> HealthPoint:
    deliveries = int(figures["consumed"] + figures["failed"])
    return HealthPoint(at, round(deliveries / seconds, 3) if seconds > 0 else 0.0, round(failure_rate(figures), 3),
                       float(figures["p99_ms"]), deliveries)


class LiveReports:
    """``reports(session)``: group -> client id -> latest health report with the lane the client is in (``lane``;
    None: base), of every live client that reports one. A report is decoded only when its text differs from every
    report of the last reading: decoding each of 5,000 clients' reports every sample was most of the sampler's cost,
    and a report changes only when its client consumed something."""

    def __init__(self, expiry_s: float) -> None:
        self.expiry_s = expiry_s
        self._decoded: dict[str, dict[str, Any] | None] = {}  # the last reading's reports by their text

    def __call__(self, session: Session) -> dict[str, Reports]:
        seen_after = utc_now() - timedelta(seconds=self.expiry_s)
        out: dict[str, Reports] = {}
        decoded: dict[str, dict[str, Any] | None] = {}
        for group, client_id, gray, lane, text in ClientRepository(session).live_health_texts(seen_after):
            if text not in decoded:
                decoded[text] = self._decoded[text] if text in self._decoded else _decode(text, group, client_id)
            if health := decoded[text]:
                out.setdefault(group, {})[client_id] = {**health, "lane": lane_of(gray, lane)}
        self._decoded = decoded
        return out


def _decode(text: str, group: str, client_id: str) -> dict[str, Any] | None:
    """A stored report, None (left out of the charts, with a warning) when it is not a JSON object: one damaged row
    must not stop the sampler."""
    try:
        report = json.loads(text)
    except ValueError:
        report = None
    if isinstance(report, dict):
        return report
    if text != "null":
        log.warning("health report of client %s in group %s is not a JSON object; left out of the charts",
                    client_id, group)
    return None


class HealthSampler:
    """Feeds ``history`` every ``history.sample_s`` from the database; ``start()`` / ``async stop()``."""

    def __init__(self, history: HealthHistory, read: Callable[[], dict[str, Reports]]) -> None:
        self.history = history
        self._read = read
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="console health sampler")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def _sample(self) -> None:
        """Read and add up in a worker thread: the event loop keeps serving meanwhile."""
        self.history.add(self._read(), time.time())

    async def _loop(self) -> None:
        next_at = time.monotonic()
        while True:
            try:
                await asyncio.to_thread(self._sample)
            except SQLAlchemyError as exc:  # the database is down: a gap in the charts, the sampler goes on
                log.warning("health sample skipped: %s", exc)
            next_at += self.history.sample_s
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
