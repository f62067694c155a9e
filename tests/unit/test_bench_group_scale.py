"""The group-scale bench's convergence check, with gray and with several lanes (docs/lanes.md's slot layout)."""

from __future__ import annotations

from graymq.bench.bench_group_scale import group_converged
from graymq.core.queue_layout import lane_base_ids, slot_queue_ids

QUEUES, GRAY = 12, 2  # 8 base + gray queues and two more slots of 2


def test_gray_and_base_each_holding_their_own_queues_have_converged() -> None:
    base, gray = lane_base_ids(8, GRAY), slot_queue_ids(8, GRAY, 1, 0)
    holdings = {"b1": (None, list(base[:3])), "b2": (None, list(base[3:])), "g1": ("gray", list(gray))}
    assert group_converged(holdings, 8, GRAY)
    assert not group_converged({**holdings, "b2": (None, list(base[3:5]))}, 8, GRAY)  # a base queue nobody holds
    assert not group_converged({**holdings, "g1": ("gray", [*gray, base[0]])}, 8, GRAY)  # gray holds a base queue


def test_each_lane_must_hold_a_whole_slot_of_its_own() -> None:
    base = list(lane_base_ids(QUEUES, GRAY, 3))
    slots = [list(slot_queue_ids(QUEUES, GRAY, 3, s)) for s in range(3)]
    holdings = {"b1": (None, base[:3]), "b2": (None, base[3:]), "v2": ("v2", slots[1]), "v3": ("v3", slots[2])}
    assert group_converged(holdings, QUEUES, GRAY, 3)
    assert not group_converged({**holdings, "v3": ("v3", slots[1])}, QUEUES, GRAY, 3)  # two lanes in one slot
    assert not group_converged({**holdings, "v3": ("v3", [slots[2][0]])}, QUEUES, GRAY, 3)  # half a slot
    assert not group_converged({**holdings, "v2b": ("v2", [])}, QUEUES, GRAY, 3)  # 2 and 0 queues: not even
    split = {**holdings, "v2": ("v2", slots[1][:1]), "v2b": ("v2", slots[1][1:])}
    assert group_converged(split, QUEUES, GRAY, 3)
