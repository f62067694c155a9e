"""Driver side of a read: the job's queue set, where each queue starts and ends, and offset commits.

Async like the rest of the client; Spark's driver-side workers use it through
``graymq.client.sync.SyncFacade``. It never registers in the name server (the job's ``SparkMember``
does that).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from graymq.client.consumer.pull_consumer import PullConsumer
from graymq.client.message import MessageQueue
from graymq.client.spark.offsets import QueueOffsets
from graymq.client.spark.options import SourceOptions
from graymq.core.route import TopicRoute
from graymq.nameserver_api.client import NotFoundError
from graymq.protocol.errors import GrayMQError, NameServerError

log = logging.getLogger(__name__)


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
    """Queue set and offsets of one read, asked of the name server and the brokers with an unregistered PullConsumer."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.consumer = PullConsumer(options.group, options.nameserver, gray=options.gray, role="spark",
                                     register=False)
        self._switch: bool | None = None

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
        """Commit ``offsets`` (next offset to consume per queue) under the job's group; returns what was committed.

        A broker that does not answer is logged and left out: the offsets stay in the
        checkpoint and the next commit carries them.
        """
        queues = list(offsets)
        answers = await asyncio.gather(*(self.consumer.commit(mq, offsets[mq]) for mq in queues),
                                       return_exceptions=True)
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
