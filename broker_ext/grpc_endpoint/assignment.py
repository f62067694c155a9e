"""Which queues of a topic a stock consumer receives from, and QueryAssignment, which tells it.

The sides are ``AllocateMessageQueueGray``'s: a gray consumer takes the gray queues (and, with a weight, the
weighted normal ones); a normal consumer the other normal queues, and the gray queues too when the group has no gray
consumer and its orphan policy is ``adopt``; with the gray switch off every queue is normal. Pop consumers of one
side share every queue of their side (the broker hands each message to one of them), so there is no split per
client: the answer depends only on the client's side and the group's gray settings.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from graymq.broker_ext.grpc_endpoint.credentials import Caller
from graymq.broker_ext.grpc_endpoint.route import RouteService
from graymq.broker_ext.grpc_endpoint.status import OK
from graymq.core.allocate import AllocateMessageQueueGray
from graymq.core.group_gray import GroupGray
from graymq.core.message_queue import MessageQueue
from graymq.core.queue_layout import gray_queue_ids, weighted_queue_ids
from graymq.protocol.membership import OrphanPolicy
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from graymq.protocol.rocketmq_v2 import service_pb2 as v2s

QueueFilter = Callable[[Caller, str, str], Awaitable[frozenset[int] | None]]  # (caller, group, topic) -> ids


@dataclass(frozen=True, slots=True)
class Side:
    """A consumer's side as the allocation needs it: its flag, retired or not, and whether its group has a gray
    consumer anywhere (a stock one or one of graymq's)."""

    gray: bool
    retired: bool
    group_has_gray: bool


def receivable_queue_ids(queue_nums: int, gray_queue_nums: int, side: Side, group: GroupGray) -> frozenset[int]:
    """The queue ids a consumer on ``side`` receives from, of a topic of ``queue_nums`` (``gray_queue_nums`` gray).

    >>> hold = GroupGray(switch=True, weight=0, orphan_policy="hold")
    >>> sorted(receivable_queue_ids(6, 2, Side(True, False, True), hold))
    [0, 5]
    >>> sorted(receivable_queue_ids(6, 2, Side(False, False, True), GroupGray(weight=50)))
    [1, 3]
    >>> sorted(receivable_queue_ids(6, 2, Side(False, False, False), GroupGray(orphan_policy="adopt")))
    [0, 1, 2, 3, 4, 5]
    >>> sorted(receivable_queue_ids(6, 2, Side(True, True, True), hold))
    []
    """
    if side.retired:
        return frozenset()
    if not group.switch:
        return frozenset(range(queue_nums))
    return _ids(queue_nums, gray_queue_nums, side.gray, side.group_has_gray, group.weight, group.orphan_policy)


@functools.lru_cache(maxsize=1024)
def _ids(queue_nums: int, gray_queue_nums: int, gray: bool, group_has_gray: bool, weight: int,
         orphan_policy: OrphanPolicy) -> frozenset[int]:
    gray_ids = frozenset(gray_queue_ids(queue_nums, gray_queue_nums))
    weighted = frozenset(weighted_queue_ids(queue_nums, gray_queue_nums, weight))
    allocation = AllocateMessageQueueGray(lambda mq: mq.queue_id in gray_ids, orphan_policy=orphan_policy,
                                          is_weighted=lambda mq: mq.queue_id in weighted)
    queues = [MessageQueue("", "", queue_id) for queue_id in range(queue_nums)]
    gray_side, normal_side = allocation.sides(queues, group_has_gray or gray)
    return frozenset(mq.queue_id for mq in (gray_side if gray else normal_side))


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
