"""Which queues of a topic a stock consumer receives from, and QueryAssignment, which tells it.

The sides are ``AllocateMessageQueueGray``'s: a consumer in a lane takes its lane's slot and, with a weight, the base
queues the lane's weight gives it (``core.queue_layout.lane_weight_shares``, as graymq's consumers split them); a base
consumer the other base queues, and the slots of lanes without a
consumer in its group whose orphan policy is ``adopt``; with the gray switch off every queue is base. Pop consumers
of one side share every queue of their side (the broker hands each message to one of them), so there is no split per
client: the answer depends only on the client's side and the group's gray settings.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from graymq.broker_ext.grpc_endpoint.credentials import Caller
from graymq.broker_ext.grpc_endpoint.route import RouteService
from graymq.broker_ext.grpc_endpoint.status import OK
from graymq.broker_ext.topic_config import LanePairs, lane_pairs
from graymq.core.allocate import AllocateMessageQueueGray
from graymq.core.group_gray import GroupGray
from graymq.core.message_queue import MessageQueue
from graymq.core.queue_layout import GRAY_LANE, lane_weight_shares, slot_of_queue
from graymq.core.route import FREE_SLOT
from graymq.protocol.membership import OrphanPolicy
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from graymq.protocol.rocketmq_v2 import service_pb2 as v2s

QueueFilter = Callable[[Caller, str, str], Awaitable[frozenset[int] | None]]  # (caller, group, topic) -> ids


@dataclass(frozen=True, slots=True)
class Side:
    """A consumer's side as the allocation needs it: the lane it is in (None: base), retired or not, and the lanes
    with a consumer in its group anywhere (stock ones or graymq's)."""

    lane: str | None
    retired: bool
    lanes_present: frozenset[str] = frozenset()


def stock_lanes(lanes: LanePairs | None) -> LanePairs | None:
    """The lane map a stock client's side is read with: the broker's, and the ``gray`` lane in slot 0 while it holds
    no slot and no lane is known to hold slot 0 (``gray`` takes slot 0 when it is free: a broker that has not heard
    so yet sends and receives where the name server puts it).

    >>> stock_lanes(None), stock_lanes((("v2", 1),)), stock_lanes((("v2", 0),))
    (None, (('gray', 0), ('v2', 1)), (('v2', 0),))
    """
    if lanes is None or any(lane == GRAY_LANE or slot == 0 for lane, slot in lanes):
        return lanes
    return lane_pairs({**dict(lanes), GRAY_LANE: 0})


def receivable_queue_ids(queue_nums: int, gray_queue_nums: int, side: Side, group: GroupGray, *,
                         lane_slots: int = 1, lanes: LanePairs | None = None) -> frozenset[int]:
    """The queue ids a consumer on ``side`` receives from, of a topic of ``queue_nums`` (``gray_queue_nums`` in each
    of its ``lane_slots`` lane slots, held as ``lanes`` says): a consumer in a lane that lane's slot, a base one the
    base queues and the slots of lanes without a consumer in its group whose orphan policy is ``adopt``.

    >>> hold, gray = GroupGray(switch=True, weight=0, orphan_policy="hold"), frozenset({"gray"})
    >>> sorted(receivable_queue_ids(6, 2, Side("gray", False, gray), hold))
    [0, 5]
    >>> sorted(receivable_queue_ids(6, 2, Side(None, False, gray), GroupGray(weight=50)))
    [1, 3]
    >>> sorted(receivable_queue_ids(6, 2, Side(None, False), GroupGray(orphan_policy="adopt")))
    [0, 1, 2, 3, 4, 5]
    >>> sorted(receivable_queue_ids(6, 2, Side("gray", True, gray), hold))
    []
    >>> lanes = (("gray", 1), ("v2", 0))  # 10 queues, 3 slots of 2: slot 0 is 0 5, slot 1 is 6 7, slot 2 is 8 9
    >>> sorted(receivable_queue_ids(10, 2, Side("gray", False, gray), hold, lane_slots=3, lanes=lanes))
    [6, 7]
    >>> sorted(receivable_queue_ids(10, 2, Side("v2", False), hold, lane_slots=3, lanes=lanes))
    [0, 5]
    >>> adopt_v2 = GroupGray(lane_policies={"v2": "adopt"})  # v2 has no consumer in the group: base takes it
    >>> sorted(receivable_queue_ids(10, 2, Side(None, False, gray), adopt_v2, lane_slots=3, lanes=lanes))
    [0, 1, 2, 3, 4, 5]
    >>> v2_half = GroupGray(lane_weights={"v2": 50})  # v2's weight: half of base 1..4 besides its slot
    >>> sorted(receivable_queue_ids(10, 2, Side("v2", False), v2_half, lane_slots=3, lanes=lanes))
    [0, 2, 4, 5]
    >>> sorted(receivable_queue_ids(10, 2, Side(None, False, frozenset({"v2"})), v2_half, lane_slots=3, lanes=lanes))
    [1, 3]
    """
    if side.retired:
        return frozenset()
    if not group.switch:
        return frozenset(range(queue_nums))
    present = side.lanes_present | ({side.lane} if side.lane is not None else set())
    return _ids(queue_nums, gray_queue_nums, lane_slots, stock_lanes(lanes), side.lane, frozenset(present),
                group.weights, group.orphan_policy, tuple(sorted(group.lane_policies.items())))


@functools.lru_cache(maxsize=1024)
def _ids(queue_nums: int, gray_queue_nums: int, lane_slots: int, lanes: LanePairs | None, lane: str | None,
         lanes_present: frozenset[str], weights: tuple[tuple[str, int], ...], orphan_policy: OrphanPolicy,
         lane_policies: tuple[tuple[str, OrphanPolicy], ...]) -> frozenset[int]:
    slot_lanes = {slot: name for name, slot in (lanes if lanes is not None else ((GRAY_LANE, 0),))}

    def lane_of(mq: MessageQueue) -> str | None:
        slot = slot_of_queue(mq.queue_id, queue_nums, gray_queue_nums, lane_slots)
        return None if slot is None else slot_lanes.get(slot, FREE_SLOT)

    shares = lane_weight_shares(queue_nums, gray_queue_nums, lane_slots, weights)
    allocation = AllocateMessageQueueGray(lambda mq: lane_of(mq) is not None, orphan_policy=orphan_policy,
                                          weighted_lane=lambda mq: shares.get(mq.queue_id), lane_of=lane_of,
                                          lane_policies=dict(lane_policies))
    queues = [MessageQueue("", "", queue_id) for queue_id in range(queue_nums)]
    return frozenset(mq.queue_id for mq in allocation.lane_sides(queues, lanes_present).get(lane, []))


class AssignmentService:
    """``query_assignment``: the queues of the topic's route that the caller receives from. The ids are this
    broker's answer for its own layout of the topic, which is the topic's layout on every broker."""

    def __init__(self, routes: RouteService, queue_filter: QueueFilter) -> None:
        self.routes = routes
        self.queue_filter = queue_filter

    async def query_assignment(self, request: v2s.QueryAssignmentRequest, caller: Caller
                               ) -> v2s.QueryAssignmentResponse:
        queues = await self.routes.message_queues(request.topic, caller)
        ids = await self.queue_filter(caller, request.group.name, request.topic.name)
        return v2s.QueryAssignmentResponse(status=OK, assignments=[
            v2.Assignment(message_queue=mq) for mq in queues if ids is None or mq.id in ids])
