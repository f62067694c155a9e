"""Consume health as clients report it (per side: ``gray`` = v2, ``normal`` = v1) and how reports add up.

A report is ``{side: {"consumed", "failed", "sent_back", "dead_lettered", "p50_ms", "p99_ms"}}``: the counters
grow from the client's start, the percentiles cover its recent window. The name server's metrics and the
rollout controller both add reports up with ``add_up``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

SIDES = ("gray", "normal")
COUNTERS = ("consumed", "failed", "sent_back", "dead_lettered")
PERCENTILES = ("p50_ms", "p99_ms")


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
            figures = (report or {}).get(side) or {}
            for name in COUNTERS:
                total[side][name] += int(figures.get(name) or 0)
            for name in PERCENTILES:
                total[side][name] = max(total[side][name], float(figures.get(name) or 0.0))
    return total


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
