"""A ``StreamingJob``'s producer: the job, once, in its sink's producer group, following that group's flag.

The job consumes one group (its consumer side, ``SparkMember``) and writes through the ``graymq`` sink in a
producer group; as graymq's own client does for a service that consumes group A and produces in group B, the
two sides follow their own group. The lane of the job's writes is ``gray_side.send_lane`` with the job's
consumer lane as the propagated mark: a job in a lane writes in it while its producer group's release lets it (the
switch on, marks honoured, or the producer's own lane that one); once a promote's producer step or
``graymq gray flag PGROUP CLIENT off`` gives this producer an explicit normal flag, its writes go normal even
while the job still reads its lane's queues (its drain then writes normal too: the upstream release is over).

The job declares its consumer lane (while in it or draining it, none after the flip) as the producer's
lane, so ``gray status PGROUP`` shows the job with its side. What the producer reports is the side of the
query that is writing (``writing``), not the flag it was just told: a promote waits until the job has
restarted its query on the normal side, so no gray row follows a "normal" report. The tasks send with
``registerProducer=false`` on the side decided here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from graymq.client.config import ClientConfig
from graymq.client.producer import Producer
from graymq.core.gray_side import send_lane
from graymq.core.queue_layout import GRAY_LANE


class JobProducer(Producer):
    """Registered as role ``producer`` with the job's client id and labels; sends nothing itself."""

    def __init__(self, group: str, config: ClientConfig, *, client_id: str, labels: Mapping[str, str],
                 lane: str | None, heartbeat_interval_s: float) -> None:
        super().__init__(group, client_id=client_id, labels=dict(labels), gray=lane is not None,
                         lane=None if lane == GRAY_LANE else lane, config=config,
                         heartbeat_interval_s=heartbeat_interval_s)
        self.writing = lane  # the lane of the running query's writes (None: base; what is reported)

    def side(self, job_lane: str | None) -> str | None:
        """The lane the job's writes take now (None: base), for a job consuming in ``job_lane``."""
        return send_lane(self.lane or self.gray, None, job_lane or False, marks_honoured=self.gray_marks,
                         gray_switch=self.gray_switch)

    async def declare(self, lane: str | None) -> None:
        """Declare the job's consumer lane as this producer's when it changed (a flag set on it still wins)."""
        declared = (True if lane == GRAY_LANE else lane) if lane else False
        if declared == self.membership.declared_gray:
            return
        self.membership.declared_gray = declared
        self.gray, self.lane = lane is not None, None if lane == GRAY_LANE else lane
        self.membership.changed()
        await self.membership.beat()

    async def report_writing(self, lane: str | None) -> bool:
        """The query now writes in ``lane`` (None: base): report it at once; False when no name server heard it."""
        self.writing = lane
        self.membership.changed()
        return await self.membership.beat() is not None

    def _report(self) -> dict[str, Any]:
        report = super()._report()
        lane = self.writing if self.started else None
        return {**report, "gray": lane is not None, "state": "GRAY" if lane else "NORMAL", "lane": lane,
                "gray_marks": self.gray_marks and lane is not None}
