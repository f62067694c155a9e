"""What lanes cost (docs/lanes.md), base + gray against base + 3 lanes, in one run and one process, no network:

- rebalance: every consumer of a group of ``CONSUMERS`` computing its share of a topic of ``BROKERS`` brokers (the
  queues a rebalance splits), with ``AllocateMessageQueueGray`` as the client and the broker run it; the gray case
  has a fifth of the group gray, the lanes case the same fifth spread over 3 lanes. Figures: µs per consumer and
  ms for the whole group (what one membership change costs the group's CPU, summed over its clients);
- send path: a send choosing its side (``send_lane``) and its queue (the producer's ``MemoSelector``) for a base,
  a gray and a lane message on the same route: µs per send; the lanes case must not cost more than the gray one.

    python -m graymq.bench.bench_lanes
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from graymq.bench.common import Figures
from graymq.core.allocate import AllocateMessageQueueGray, ConsumerView
from graymq.core.gray_side import send_lane
from graymq.core.route import BrokerData, TopicRoute
from graymq.core.selector import MemoSelector

CONSUMERS, BROKERS, QUEUES, SLOT_QUEUES = 200, 4, 16, 2
SENDS = 200_000


def _route(lanes: dict[str, int], slots: int) -> TopicRoute:
    total = QUEUES + (slots - 1) * SLOT_QUEUES
    brokers = tuple(BrokerData(f"broker-{i}", f"127.0.0.1:{10911 + i}", total, SLOT_QUEUES, lane_slots=slots)
                    for i in range(BROKERS))
    return TopicRoute("T", brokers, TopicRoute.lane_pairs(lanes))


def _group(lanes: list[str]) -> list[ConsumerView]:
    """A fifth of the group in ``lanes`` (in turn), the rest base."""
    return [ConsumerView(f"c{i:03d}", True, lanes[i % len(lanes)]) if i % 5 == 0 else ConsumerView(f"c{i:03d}")
            for i in range(CONSUMERS)]


def _timed(fn: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def rebalance_figures(route: TopicRoute, group: list[ConsumerView]) -> Figures:
    strategy = AllocateMessageQueueGray(route.is_gray, lane_of=route.lane_of)
    queues = route.queues(readable=True)
    shares = [strategy.allocate("G", c.client_id, queues, group) for c in group]
    assert sorted(q for share in shares for q in share) == sorted(queues)  # every queue held once
    per_client = _timed(lambda: [strategy.allocate("G", c.client_id, queues, group) for c in group], 5) / len(group)
    return {"rebalance_us_per_consumer": round(per_client * 1e6, 1),
            "rebalance_group_ms": round(per_client * len(group) * 1e3, 2)}


def send_figures(route: TopicRoute, lane: str | bool) -> Figures:
    selector = MemoSelector()
    figures: Figures = {}
    for name, side in (("base", None), ("lane", lane)):
        def one(side: str | bool | None = side) -> object:
            chosen = send_lane(side, None, None, marks_honoured=True, gray_switch=True)
            return selector.select(route, True if chosen == "gray" else chosen or False)
        figures[f"send_{name}_us"] = round(_timed(one, SENDS) * 1e6, 3)
    return figures


def run() -> dict[str, Figures]:
    gray = _route({"gray": 0}, 1)
    lanes = _route({"v2": 0, "v3": 1, "v4": 2}, 3)
    return {
        "base + gray": {**rebalance_figures(gray, _group(["gray"])), **send_figures(gray, True)},
        "base + 3 lanes": {**rebalance_figures(lanes, _group(["v2", "v3", "v4"])), **send_figures(lanes, "v3")},
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=1))
