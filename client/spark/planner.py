"""Driver side of a read: the job's queue set, where each queue starts and ends, and offset commits.

Async like the rest of the client; Spark's driver-side workers use it through
``graymq.client.sync.SyncFacade``. It never registers in the name server (the job's ``SparkMember``
does that).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from graymq.client.consumer.pull_consumer import PullConsumer
from graymq.client.lane_slots import hold_slots
from graymq.client.message import MessageQueue
from graymq.client.spark.offsets import QueueOffsets
from graymq.client.spark.options import SourceOptions
from graymq.core.allocate import AllocateMessageQueueGray
from graymq.core.route import TopicRoute
from graymq.nameserver_api.client import NotFoundError
from graymq.nameserver_api.lane_records import GroupLane
from graymq.protocol.errors import GrayMQError, NameServerError
from graymq.protocol.membership import OrphanPolicy

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class GroupLanes:
    """The job's group as lanes see it: the lanes it has a consumer in (a live client of another role than producer,
    in the lane or headed there) and the orphan policy of each lane (a lane not named: ``hold``)."""

    present: frozenset[str] = frozenset()
    policies: Mapping[str, OrphanPolicy] = field(default_factory=dict)

    @classmethod
    def of(cls, lanes: Sequence[GroupLane]) -> GroupLanes:
        """From the name server's ``/v1/groups/{group}/lanes`` (clients listed as ``ID (ROLE)``)."""
        present = frozenset(lane.lane for lane in lanes if any(not c.endswith("(producer)") for c in lane.clients))
        return cls(present, {lane.lane: lane.orphan_policy for lane in lanes})


def job_queues(route: TopicRoute, lane: str | None, gray_switch: bool,
               lanes: GroupLanes | None = None) -> list[MessageQueue]:
    """A job in a lane reads the queues of the slot its lane holds; a base job the base queues, and a lane's queues
    its group adopts (the lane has no consumer in the group and its orphan policy is ``adopt``), as a base consumer's
    rebalance would (``AllocateMessageQueueGray.lane_sides``): every queue while the switch is off.

    With the group's gray switch off producers use every queue and nobody is in a lane, so the base side owns the
    slots' queue ids too; a lane job keeps to its slot (it is told to become base at once).
    """
    queues = route.queues(readable=True)
    if not gray_switch:
        return queues if lane is None else [mq for mq in queues if route.lane_of(mq) == lane]
    lanes = lanes or GroupLanes()
    strategy = AllocateMessageQueueGray(route.is_gray, lane_of=route.lane_of, lane_policies=lanes.policies)
    return strategy.lane_sides(queues, lanes.present | ({lane} if lane else set())).get(lane, [])


class Planner:
    """Queue set and offsets of one read, asked of the name server and the brokers with an unregistered PullConsumer."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.consumer = PullConsumer(options.group, options.nameserver, gray=options.gray, lane=options.lane,
                                     role="spark", register=False)
        self._switch: bool | None = None
        self._lanes: GroupLanes | None = None

    async def close(self) -> None:
        await self.consumer.stop()

    async def gray_switch(self) -> bool:
        """The group's gray switch; a group the name server does not know yet gets the default (on).

        While every name server is down the last known value holds (like cached routes).
        """
        try:
            data = await self.consumer.nameserver.group_clients(self.options.group, role="spark")
        except NotFoundError:
            self._switch = True
        except NameServerError as exc:
            if self._switch is None:
                raise
            log.warning("group %s: gray switch unknown, keeping %s: %s", self.options.group, self._switch, exc.message)
        else:
            self._switch = data.gray_switch
        return self._switch

    async def group_lanes(self) -> GroupLanes:
        """The lanes the group has consumers in and their orphan policies (none for a group the name server does not
        know); while every name server is down the last known answer holds."""
        try:
            self._lanes = GroupLanes.of(await self.consumer.nameserver.group_lanes(self.options.group))
        except NotFoundError:
            self._lanes = GroupLanes()
        except NameServerError as exc:
            if self._lanes is None:
                raise
            log.warning("group %s: lanes unknown, keeping the last known: %s", self.options.group, exc.message)
        return self._lanes

    async def queues(self) -> list[MessageQueue]:
        """The job's queue set now: its lane's slot, or for a base job the base queues and those it adopts."""
        lane = self.options.in_lane
        switch = True if lane else await self.gray_switch()
        lanes = await self.group_lanes() if switch and lane is None else None
        result: list[MessageQueue] = []
        for topic in self.options.topics:
            result += job_queues(await self.route(topic), lane, switch, lanes)
        return result

    async def route(self, topic: str) -> TopicRoute:
        """The topic's route, once a lane job's lane holds a slot of it: read again (the job's heartbeat takes the
        slot), else taken as a consumer of the lane takes it."""
        route = await self.consumer.route(topic)
        lane = self.options.in_lane
        if lane is None or route.slot_of_lane(lane) is not None or not any(b.gray_queue_nums for b in route.brokers):
            return route
        route = await self.consumer.routes.get(topic, refresh=True)
        if route.slot_of_lane(lane) is None:
            await hold_slots(self.consumer.nameserver, self.consumer.routes, [topic], lane)
            route = await self.consumer.route(topic)
        return route

    async def starting_offsets(self, queues: list[MessageQueue]) -> QueueOffsets:
        """Per ``startingOffsets``: the group's committed offset (earliest where none), earliest or latest."""
        mode = self.options.starting_offsets
        if mode == "latest":
            return await self.max_offsets(queues)
        earliest = await _each(queues, self.consumer.min_offset)
        if mode == "earliest":
            return earliest
        committed = await _each(queues, self.consumer.committed_offset)
        return {mq: max(committed[mq], earliest[mq]) for mq in queues}

    async def max_offsets(self, queues: list[MessageQueue]) -> QueueOffsets:
        return await _each(queues, self.consumer.max_offset)

    async def latest_offsets(self, current: QueueOffsets) -> QueueOffsets:
        """Max offset per queue of ``current``; a queue whose broker does not answer stays where it is."""
        queues = list(current)
        answers = await asyncio.gather(*(self.consumer.max_offset(mq) for mq in queues), return_exceptions=True)
        latest = {}
        for mq, answer in zip(queues, answers, strict=True):
            if isinstance(answer, GrayMQError):
                log.warning("%s: max offset unavailable, not read this batch: %s", mq, answer.message)
                answer = current[mq]
            elif isinstance(answer, BaseException):
                raise answer
            latest[mq] = answer
        return latest

    async def commit(self, offsets: QueueOffsets) -> QueueOffsets:
        return await commit_offsets(self.consumer, offsets)


async def commit_offsets(consumer: PullConsumer, offsets: QueueOffsets) -> QueueOffsets:
    """Commit ``offsets`` (next offset to consume per queue) under ``consumer``'s group; returns what was committed.

    A broker that does not answer is logged and left out: the offsets stay in the checkpoint and the next commit
    carries them.
    """
    queues = list(offsets)
    answers = await asyncio.gather(*(consumer.commit(mq, offsets[mq]) for mq in queues), return_exceptions=True)
    committed = {}
    for mq, answer in zip(queues, answers, strict=True):
        if isinstance(answer, GrayMQError):
            log.warning("%s: offset %d not committed: %s", mq, offsets[mq], answer.message)
        elif isinstance(answer, BaseException):
            raise answer
        else:
            committed[mq] = offsets[mq]
    return committed


async def _each(queues: list[MessageQueue], call: Callable[[MessageQueue], Awaitable[int]]) -> QueueOffsets:
    values = await asyncio.gather(*(call(mq) for mq in queues))
    return dict(zip(queues, values, strict=True))
