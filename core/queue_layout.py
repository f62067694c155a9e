"""The gray queue layout: which queue ids of a topic (per broker) carry gray traffic.

Producer, consumer, broker and the Spark source all call these functions; nothing else
computes the layout. A rebalance asks about every queue of a topic, so the layouts are computed
once per (queue count, gray count, weight) and remembered: recomputing them per queue made each
consumer's rebalance quadratic in the topic's queues.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from types import MappingProxyType


def gray_queue_ids(queue_nums: int, gray_queue_nums: int) -> tuple[int, ...]:
    """Gray queue ids: the first ``ceil(g/2)`` and the last ``floor(g/2)`` of ``queue_nums`` queues.

    >>> gray_queue_ids(6, 2)
    (0, 5)
    >>> gray_queue_ids(8, 3)
    (0, 1, 7)
    >>> gray_queue_ids(4, 0)
    ()
    """
    if isinstance(queue_nums, bool) or not isinstance(queue_nums, int):
        raise TypeError(f"queue_nums must be an int, got {type(queue_nums).__name__}")
    if isinstance(gray_queue_nums, bool) or not isinstance(gray_queue_nums, int):
        raise TypeError(f"gray_queue_nums must be an int, got {type(gray_queue_nums).__name__}")
    if queue_nums < 0:
        raise ValueError(f"queue_nums must be >= 0, got {queue_nums}")
    if gray_queue_nums < 0:
        raise ValueError(f"gray_queue_nums must be >= 0, got {gray_queue_nums}")
    if gray_queue_nums > queue_nums:
        raise ValueError(f"gray_queue_nums ({gray_queue_nums}) exceeds queue_nums ({queue_nums})")
    return _gray_ids(queue_nums, gray_queue_nums)


@functools.lru_cache(maxsize=1024)
def _gray_ids(queue_nums: int, gray_queue_nums: int) -> tuple[int, ...]:
    head = (gray_queue_nums + 1) // 2
    tail = gray_queue_nums // 2
    return tuple(range(head)) + tuple(range(queue_nums - tail, queue_nums))


def normal_queue_ids(queue_nums: int, gray_queue_nums: int) -> tuple[int, ...]:
    """The queue ids that are not gray, ascending."""
    gray_queue_ids(queue_nums, gray_queue_nums)  # checks the arguments
    return _normal_ids(queue_nums, gray_queue_nums)


@functools.lru_cache(maxsize=1024)
def _normal_ids(queue_nums: int, gray_queue_nums: int) -> tuple[int, ...]:
    gray = set(_gray_ids(queue_nums, gray_queue_nums))
    return tuple(q for q in range(queue_nums) if q not in gray)


def is_gray_queue(queue_id: int, queue_nums: int, gray_queue_nums: int) -> bool:
    """Whether ``queue_id`` is one of the gray queues of the layout."""
    if not 0 <= queue_id < queue_nums:
        raise ValueError(f"queue_id {queue_id} outside 0..{queue_nums - 1}")
    return queue_id in gray_queue_ids(queue_nums, gray_queue_nums)


def weighted_count(normal_nums: int, weight: int) -> int:
    """How many of ``normal_nums`` normal queues a gray side with ``weight`` percent takes: none at 0, else
    ``max(1, floor(weight × normal_nums / 100 + 0.5))``.

    >>> [weighted_count(6, w) for w in (0, 1, 25, 50, 100)]
    [0, 1, 2, 3, 6]
    """
    if not 0 <= weight <= 100:
        raise ValueError(f"weight must be 0..100, got {weight}")
    if weight == 0 or normal_nums == 0:
        return 0
    return min(normal_nums, max(1, (weight * normal_nums * 2 + 100) // 200))


def weighted_queue_ids(queue_nums: int, gray_queue_nums: int, weight: int) -> tuple[int, ...]:
    """The normal queue ids (of one broker's share of a topic) a gray side with ``weight`` percent consumes:
    ``weighted_count`` of them, spread evenly over the normal ids, so every client and the broker agree.

    >>> weighted_queue_ids(8, 2, 50)   # normal ids 1..6
    (2, 4, 6)
    >>> weighted_queue_ids(8, 2, 10), weighted_queue_ids(8, 2, 0), weighted_queue_ids(4, 0, 100)
    ((4,), (), (0, 1, 2, 3))
    """
    gray_queue_ids(queue_nums, gray_queue_nums)  # checks the arguments
    return _weighted_ids(queue_nums, gray_queue_nums, weight)


@functools.lru_cache(maxsize=1024)
def _weighted_ids(queue_nums: int, gray_queue_nums: int, weight: int) -> tuple[int, ...]:
    normal = _normal_ids(queue_nums, gray_queue_nums)
    k = weighted_count(len(normal), weight)
    return tuple(normal[(2 * i + 1) * len(normal) // (2 * k)] for i in range(k))


GRAY_LANE = "gray"
"""The lane that is today's gray side: ``--gray`` is ``--lane gray``, slot 0 is its home."""


@functools.lru_cache(maxsize=1024)
def base_queue_nums(queue_nums: int, gray_queue_nums: int, lane_slots: int) -> int:
    """The queues of one broker that are not appended lane slots: ``queue_nums - (lane_slots - 1) × gray_queue_nums``
    (slot 0 lies inside them, as today's gray queues do).

    >>> base_queue_nums(10, 2, 2), base_queue_nums(8, 2, 1)
    (8, 8)
    """
    if lane_slots < 1:
        raise ValueError(f"lane_slots must be >= 1, got {lane_slots}")
    base = queue_nums - (lane_slots - 1) * gray_queue_nums
    if base < gray_queue_nums:
        raise ValueError(f"{queue_nums} queues cannot hold {lane_slots} lane slots of {gray_queue_nums} queues")
    gray_queue_ids(base, gray_queue_nums)  # checks the types and ranges
    return base


def slot_queue_ids(queue_nums: int, gray_queue_nums: int, lane_slots: int, slot: int) -> tuple[int, ...]:
    """The queue ids of lane slot ``slot`` on one broker of ``queue_nums`` queues: slot 0 is today's gray queues,
    slot ``s >= 1`` the ``gray_queue_nums`` ids appended after the base queues, so growing a topic's slots moves no
    queue.

    >>> slot_queue_ids(8, 2, 1, 0), slot_queue_ids(12, 2, 3, 0), slot_queue_ids(12, 2, 3, 2)
    ((0, 7), (0, 7), (10, 11))
    """
    base = base_queue_nums(queue_nums, gray_queue_nums, lane_slots)
    if not 0 <= slot < lane_slots:
        raise ValueError(f"slot {slot} outside 0..{lane_slots - 1}")
    if slot == 0:
        return _gray_ids(base, gray_queue_nums)
    start = base + (slot - 1) * gray_queue_nums
    return tuple(range(start, start + gray_queue_nums))


@functools.lru_cache(maxsize=1024)
def _slots_by_queue(queue_nums: int, gray_queue_nums: int, lane_slots: int) -> dict[int, int]:
    return {q: slot for slot in range(lane_slots)
            for q in slot_queue_ids(queue_nums, gray_queue_nums, lane_slots, slot)}


def slot_of_queue(queue_id: int, queue_nums: int, gray_queue_nums: int, lane_slots: int = 1) -> int | None:
    """The lane slot ``queue_id`` belongs to, or None for a base queue.

    >>> [slot_of_queue(q, 10, 2, 2) for q in range(10)]
    [0, None, None, None, None, None, None, 0, 1, 1]
    """
    return _slots_by_queue(queue_nums, gray_queue_nums, lane_slots).get(queue_id)


def lane_base_ids(queue_nums: int, gray_queue_nums: int, lane_slots: int = 1) -> tuple[int, ...]:
    """The base (normal) queue ids of one broker: in no lane slot.

    >>> lane_base_ids(10, 2, 2)
    (1, 2, 3, 4, 5, 6)
    """
    return _normal_ids(base_queue_nums(queue_nums, gray_queue_nums, lane_slots), gray_queue_nums)


def lane_weighted_ids(queue_nums: int, gray_queue_nums: int, lane_slots: int, weight: int) -> tuple[int, ...]:
    """``weighted_queue_ids`` over the base queues of a topic with ``lane_slots`` slots (the appended slots are not
    base queues, so the weighted ids are the same whatever the slot count)."""
    return weighted_queue_ids(base_queue_nums(queue_nums, gray_queue_nums, lane_slots), gray_queue_nums, weight)


def lane_weight_shares(queue_nums: int, gray_queue_nums: int, lane_slots: int,
                       weights: tuple[tuple[str, int], ...]) -> Mapping[int, str]:
    """Which lane each weighted base queue of one broker goes to (queue id -> lane), for ``weights`` as (lane,
    percent) pairs. The shares are disjoint: ``gray`` first, then the other lanes by name, each lane takes
    ``weighted_count(base, weight)`` of the base queues the lanes before it left (fewer when fewer are left),
    spread evenly over them. ``gray`` alone takes exactly ``lane_weighted_ids``; the shares depend on the weights
    only (not on which lanes have consumers), so every client and the broker compute the same.

    >>> dict(lane_weight_shares(8, 2, 1, (("v3", 50), ("gray", 50))))   # base ids 1..6: gray 2 4 6, v3 the rest
    {2: 'gray', 4: 'gray', 6: 'gray', 1: 'v3', 3: 'v3', 5: 'v3'}
    >>> dict(lane_weight_shares(8, 2, 1, (("v3", 20), ("v2", 20))))   # v2 one of 1..6, v3 one of what is left
    {4: 'v2', 3: 'v3'}
    """
    for lane, weight in weights:
        if not 0 <= weight <= 100:
            raise ValueError(f"weight of lane {lane} must be 0..100, got {weight}")
    ordered = tuple(sorted(((lane, w) for lane, w in weights if w), key=lambda p: (p[0] != GRAY_LANE, p[0])))
    return _shares(base_queue_nums(queue_nums, gray_queue_nums, lane_slots), gray_queue_nums, ordered)


@functools.lru_cache(maxsize=1024)
def _shares(base_nums: int, gray_queue_nums: int, ordered: tuple[tuple[str, int], ...]) -> Mapping[int, str]:
    left = _normal_ids(base_nums, gray_queue_nums)
    total = len(left)
    shares: dict[int, str] = {}
    for lane, weight in ordered:
        k = min(weighted_count(total, weight), len(left))
        taken = {left[(2 * i + 1) * len(left) // (2 * k)] for i in range(k)}
        shares.update((q, lane) for q in sorted(taken))
        left = tuple(q for q in left if q not in taken)
    return MappingProxyType(shares)  # cached: read-only
