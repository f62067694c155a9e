"""A Spark job's client in the name server: role ``spark``, labels, flag, state and queues; heartbeats on the driver.

The heartbeat answer carries the job's desired lane (explicit flag, else rules on its labels, else the lane or flag
it declared; None: base) and the group's gray switch; ``StreamingJob`` acts on them. The heartbeat declares the
job's lane and reports the lane it is in.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from graymq.client.backlog import BacklogUnavailable, gray_backlog
from graymq.client.config import ClientConfig
from graymq.client.consumer.pull_consumer import PullConsumer
from graymq.client.spark.offsets import QueueOffsets
from graymq.client.spark.options import SourceOptions
from graymq.client.spark.planner import commit_offsets, job_queues
from graymq.core.queue_layout import GRAY_LANE
from graymq.protocol.membership import ClientState

log = logging.getLogger(__name__)


class SparkMember:
    """A registered PullConsumer (role ``spark``) whose report is the job's lane, state and queue set; ``config``
    (default: the options' name server and token) is shared with the job's other clients, so the job's heartbeats
    go in one request (its ``ClientInstance``)."""

    def __init__(self, options: SourceOptions, *, labels: Mapping[str, str], client_id: str | None = None,
                 heartbeat_interval_s: float = 2.0, config: ClientConfig | None = None) -> None:
        self.options = options
        self.consumer = PullConsumer(options.group, client_id=client_id, gray=options.gray, lane=options.lane,
                                     labels=dict(labels), role="spark", heartbeat_interval_s=heartbeat_interval_s,
                                     config=config or ClientConfig.from_env(options.nameserver, options.token))

    @property
    def client_id(self) -> str:
        return self.consumer.client_id

    @property
    def desired_lane(self) -> str | None:
        """The lane the name server says the job should be in (``gray``: today's gray side); None: base."""
        return self.consumer.desired_lane

    @property
    def gray_switch(self) -> bool:
        return self.consumer.gray_switch

    async def start(self) -> None:
        """Register (the first heartbeat already names the job's topics and queues) and keep heartbeating. The first
        answer gives the group's gray switch and the job's lane its slot of each topic: a lane job names its queues
        again then (before, with the switch unknown and the slot free, it named none)."""
        await self._refresh_queues()
        await self.consumer.start()
        if await self._refresh_queues(refresh=True):
            self.consumer.membership.changed()
            await self.consumer.membership.beat()

    async def stop(self) -> None:
        """Stop heartbeating and unregister: the controller stops counting the job at once."""
        await self.consumer.stop()

    async def report(self, lane: str | None, state: ClientState) -> bool:
        """Report this lane (None: base) and state now; False when no name server heard it (the heartbeat loop
        retries)."""
        self.consumer.gray, self.consumer.state = lane is not None, state
        self.consumer.lane = None if lane == GRAY_LANE else lane
        await self._refresh_queues()
        self.consumer.membership.changed()  # answers to earlier reports (say, desired gray) are stale now
        return await self.consumer.membership.beat() is not None

    async def commit_processed(self, offsets: QueueOffsets) -> QueueOffsets:
        """Commit what the job processed (next offset per queue) under its group where it is ahead of the group's
        committed offset: a queue that changed sides since, and that another job moved further, keeps its offset (as
        does one whose broker does not answer); returns what was committed."""
        known = await asyncio.gather(*(self.consumer.committed_offset(mq) for mq in offsets), return_exceptions=True)
        ahead = {mq: offset for (mq, offset), committed in zip(offsets.items(), known, strict=True)
                 if isinstance(committed, int) and offset > committed}
        return await commit_offsets(self.consumer, ahead)

    async def gray_backlog(self, lane: str) -> int | None:
        """What the group has not committed in the queues of ``lane``'s slot of the job's topics; None when a broker
        is down."""
        try:
            queues = await gray_backlog(self.consumer.brokers, self.consumer.routes, self.options.group,
                                        self.options.topics, lane=lane)
        except BacklogUnavailable as exc:
            log.info("spark job %s: %s", self.client_id, exc.message)
            return None
        return sum(q.backlog for q in queues)

    async def _refresh_queues(self, refresh: bool = False) -> bool:
        """Name the job's queues in its reports (``refresh``: from routes read again); whether they changed."""
        queues = []
        for topic in self.options.topics:
            route = await self.consumer.routes.get(topic, refresh=refresh)
            queues += job_queues(route, self.consumer.in_lane, self.consumer.gray_switch)
        changed = queues != list(self.consumer.queues)
        self.consumer.queues = queues
        return changed
