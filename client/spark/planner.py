"""Driver side of a read: the job's queue set, where each queue starts and ends, and offset commits.

Async like the rest of the client; Spark's driver-side workers use it through
``client.sync.SyncFacade``. It never registers in the name server (the job's ``SparkMember``
does that).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from client.consumer.pull_consumer import PullConsumer
from client.message import MessageQueue
from client.nameserver_client import NotFoundError
from client.route import TopicRoute
from client.spark.offsets import QueueOffsets
from client.spark.options import SourceOptions


def job_queues(route: TopicRoute, gray: bool, gray_switch: bool) -> list[MessageQueue]:
    """A gray job reads the gray queues; a normal job the others — and every queue while the switch is off.

    With the group's gray switch off producers use every queue and nobody is gray, so the
    normal side owns the gray queue ids too; a gray job keeps to the gray ids (it is told to
    become normal at once).
    """
    queues = route.queues(readable=True)
    if not gray and not gray_switch:
        return queues
    return [mq for mq in queues if route.is_gray(mq) == gray]


class Planner:
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.consumer = PullConsumer(options.group, options.nameserver, gray=options.gray, role="spark",
                                     register=False)

    async def close(self) -> None:
        await self.consumer.stop()

    async def gray_switch(self) -> bool:
        """The group's gray switch; a group the name server does not know yet gets the default (on)."""
        try:
            data = await self.consumer.nameserver.group_clients(self.options.group, role="spark")
        except NotFoundError:
            return True
        return bool(data["gray_switch"])

    async def queues(self) -> list[MessageQueue]:
        switch = True if self.options.gray else await self.gray_switch()
        result: list[MessageQueue] = []
        for topic in self.options.topics:
            result += job_queues(await self.consumer.route(topic), self.options.gray, switch)
        return result

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

    async def commit(self, offsets: QueueOffsets) -> None:
        """Commit ``offsets`` (next offset to consume per queue) to the brokers under the job's group."""
        await asyncio.gather(*(self.consumer.commit(mq, offset) for mq, offset in offsets.items()))


async def _each(queues: list[MessageQueue], call: Callable[[MessageQueue], Awaitable[int]]) -> QueueOffsets:
    values = await asyncio.gather(*(call(mq) for mq in queues))
    return dict(zip(queues, values, strict=True))
