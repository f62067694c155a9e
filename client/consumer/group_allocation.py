"""The allocation of a whole group, computed once per process for each set of inputs: after a change of the group
every consumer of it in the process rebalances on the same listings, and each one allocating the whole group (five
hundred clients) to take its own share cost the process consumers × group size per change."""

from __future__ import annotations

import functools
from collections.abc import Hashable
from dataclasses import dataclass

from graymq.client.consumer.group_view import Membership, View
from graymq.client.lru import Lru
from graymq.core.allocate import (
    STRATEGIES,
    AllocateMessageQueueGray,
    AllocateMessageQueueStrategy,
    ConsumerView,
    allocate_all,
)
from graymq.core.gray_side import mark_lane
from graymq.core.group_gray import GroupGray
from graymq.core.message_queue import MessageQueue
from graymq.core.route import TopicRoute

KEEP = 4  # whole-group allocations kept per group and topic (the latest, a change or two in flight)
GROUPS = 4096  # groups and topics whose allocations are kept, the least recently used dropped first


@dataclass(frozen=True)
class GroupAllocation:
    """Every client's share of one topic's queues; the route and base strategy are held so that their ids, which
    the key may name, stay theirs."""

    route: TopicRoute
    base: AllocateMessageQueueStrategy
    strategy: AllocateMessageQueueGray
    shares: dict[str, list[MessageQueue]]


_allocations: Lru[tuple[str, str], Lru[Hashable, GroupAllocation]] = Lru(GROUPS)  # (group, topic) -> its


def _identity(base: AllocateMessageQueueStrategy) -> type | int:
    """What names ``base`` in a key: graymq's own strategies hold no state (each consumer builds its own, all alike),
    another is itself (its id)."""
    return type(base) if type(base) in STRATEGIES.values() else id(base)


def gray_strategy(route: TopicRoute, gray: GroupGray, base: AllocateMessageQueueStrategy) -> AllocateMessageQueueGray:
    """The group's allocation strategy over ``route`` with its gray settings."""
    return AllocateMessageQueueGray(
        route.is_gray, base, orphan_policy=gray.orphan_policy, gray_switch=gray.switch,
        weighted_lane=functools.partial(route.weighted_lane, weights=gray.weights), lane_of=route.lane_of,
        lane_policies=gray.lane_policies)


def members(view: View, topic: str) -> list[ConsumerView]:
    """The clients of ``view`` subscribed to ``topic`` (or whose topics are unknown), as the strategy sees them."""
    return [ConsumerView(cid, bool(side), side if isinstance(side, str) else None)
            for cid, (side, topics) in view.items() if topics is None or topic in topics]


def listed_as_is(view: View, topic: str, client_id: str, lane: str | None, switch: bool) -> bool:
    """Whether ``view`` already shows ``client_id`` as it is (subscribed to ``topic``; in ``lane`` when the switch
    is on, for with it off no client's side counts): then adding its own entry changes no share."""
    listed = view.get(client_id)
    if listed is None or (listed[1] is not None and topic not in listed[1]):
        return False
    return not switch or mark_lane(listed[0]) == lane


def shares_of(group: str, membership: Membership, view: View, topic: str, route: TopicRoute, gray: GroupGray,
              base: AllocateMessageQueueStrategy) -> GroupAllocation:
    """Every client's share of ``topic`` in the group ``view`` shows (``membership`` its entries), shared by the
    process's consumers of the group.

    The result is shared: not to be changed."""
    known = _allocations.setdefault((group, topic), lambda: Lru(KEEP))
    key = (membership, id(route), gray.switch, gray.weights, gray.orphan_policy,
           tuple(sorted(gray.lane_policies.items())), _identity(base))
    allocation = known.get(key)
    if allocation is None:
        strategy = gray_strategy(route, gray, base)
        shares = allocate_all(strategy, group, route.queues(readable=True), members(view, topic))
        allocation = known.put(key, GroupAllocation(route, base, strategy, shares))
    return allocation
