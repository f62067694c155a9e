"""Consume health as clients report it (per side: ``gray`` = v2, ``normal`` = v1) and how reports add up.

A report is ``{side: {"consumed", "failed", "sent_back", "dead_lettered", "p50_ms", "p99_ms"}}``: the counters
grow from the client's start, the percentiles cover its recent window. Its ``lanes`` key, when present, splits the
gray side by the lane the client consumed in (``{lane: figures}``, at most ``MAX_LANES``). The rollout controller
adds reports up per side with ``add_up``, the name server's metrics per lane with ``add_up_lanes``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from graymq.protocol.names import BASE_LANE

GRAY = "gray"  # the gray side, and the lane that side was before lanes
SIDES = (GRAY, "normal")
COUNTERS = ("consumed", "failed", "sent_back", "dead_lettered")
PERCENTILES = ("p50_ms", "p99_ms")
MAX_LANES = 16  # lanes one report splits its gray side into (a client keeps the ones it consumed in last)


def empty_side() -> dict[str, float]:
    return {**{name: 0 for name in COUNTERS}, **{name: 0.0 for name in PERCENTILES}}


def add_up(reports: Iterable[Mapping[str, Any] | None]) -> dict[str, dict[str, float]]:
    """Per side: the counters summed, the percentiles the worst (highest) of the clients that consumed.

    >>> r = add_up([{"gray": {"consumed": 3, "failed": 1, "p99_ms": 5.0}}, None,
    ...             {"gray": {"consumed": 2, "p99_ms": 9.0}, "normal": {"consumed": 4}}])
    >>> r["gray"]["consumed"], r["gray"]["failed"], r["gray"]["p99_ms"], r["normal"]["consumed"]
    (5, 1, 9.0, 4)
    """
    total = {side: empty_side() for side in SIDES}
    for report in reports:
        for side in SIDES:
            _add(total[side], (report or {}).get(side))
    return total


def add_up_lanes(reports: Iterable[Mapping[str, Any] | None]) -> dict[str, dict[str, float]]:
    """Per lane, added up as ``add_up`` does: ``base`` (``BASE_LANE``) is the normal side, the ``gray`` lane and
    every other lane what the reports' ``lanes`` say; a report without them (a client from before lanes) counts its
    gray side as the ``gray`` lane's.

    >>> r = add_up_lanes([{"gray": {"failed": 3}, "normal": {"consumed": 4}, "lanes": {"v3": {"failed": 3}}},
    ...                   {"gray": {"consumed": 2}}])
    >>> r["base"]["consumed"], r["gray"]["consumed"], r["v3"]["failed"], r["gray"]["failed"]
    (4, 2, 3, 0)
    """
    total = {BASE_LANE: empty_side(), GRAY: empty_side()}
    for report in reports:
        report = report or {}
        _add(total[BASE_LANE], report.get("normal"))
        lanes = report.get("lanes") or {GRAY: report.get(GRAY)}
        for lane, figures in lanes.items():
            _add(total.setdefault(lane, empty_side()), figures)
    return total


def _add(total: dict[str, float], figures: Mapping[str, Any] | None) -> None:
    """Add one client's ``figures`` of a side or lane to ``total``: counters summed, percentiles the worst."""
    figures = figures or {}
    for name in COUNTERS:
        total[name] += int(figures.get(name) or 0)
    for name in PERCENTILES:
        total[name] = max(total[name], float(figures.get(name) or 0.0))


def failure_rate(side: Mapping[str, float]) -> float:
    """Failed deliveries over all deliveries (accepted + failed), in percent; 0 with none.

    >>> failure_rate({"consumed": 90, "failed": 10}), failure_rate({"consumed": 0, "failed": 0})
    (10.0, 0.0)
    """
    deliveries = side["consumed"] + side["failed"]
    return 100.0 * side["failed"] / deliveries if deliveries else 0.0


def since(before: Mapping[str, Mapping[str, Any] | None],
          after: Mapping[str, Mapping[str, Any] | None]) -> dict[str, dict[str, float]]:
    """Per side, what the clients did between two readings (client id -> report), added up.

    A client's counters are taken as the difference; a client new since ``before``, or whose counters went
    down (it restarted), counts whole; a client gone since is left out. Percentiles are ``after``'s.

    >>> a = {"c1": {"gray": {"consumed": 10, "failed": 2}}, "c2": {"gray": {"consumed": 50}}}
    >>> b = {"c1": {"gray": {"consumed": 25, "failed": 2, "p99_ms": 4.0}}, "c2": {"gray": {"consumed": 3}},
    ...      "c3": {"gray": {"consumed": 1}}}
    >>> r = since(a, b)["gray"]; r["consumed"], r["failed"], r["p99_ms"]
    (19, 0, 4.0)
    """
    deltas = []
    for client_id, report in after.items():
        previous = before.get(client_id) or {}
        delta: dict[str, dict[str, float]] = {}
        for side in SIDES:
            now, then = (report or {}).get(side) or {}, previous.get(side) or {}
            restarted = any(int(now.get(name) or 0) < int(then.get(name) or 0) for name in COUNTERS)
            delta[side] = {name: int(now.get(name) or 0) - (0 if restarted else int(then.get(name) or 0))
                           for name in COUNTERS}
            delta[side].update({name: float(now.get(name) or 0.0) for name in PERCENTILES})
        deltas.append(delta)
    return add_up(deltas)
