"""A ``StreamingJob``'s producer: the job, once, in its sink's producer group, following that group's flag.

The job consumes one group (its consumer side, ``SparkMember``) and writes through the ``graymq`` sink in a
producer group; as graymq's own client does for a service that consumes group A and produces in group B, the
two sides follow their own group. The side of the job's writes is ``gray_side.send_side`` with the job's
consumer side as the propagated mark: a gray job writes gray while its producer group's release lets it (the
switch on, marks honoured, or the producer's own flag gray); once a promote's producer step or
``graymq gray flag PGROUP CLIENT off`` gives this producer an explicit normal flag, its writes go normal even
while the job still reads the gray queues (its drain then writes normal too: the upstream release is over).

The job declares its consumer side (gray while gray or draining, normal after the flip) as the producer's
flag, so ``gray status PGROUP`` shows the job with its side. What the producer reports is the side of the
query that is writing (``writing``), not the flag it was just told: a promote waits until the job has
restarted its query on the normal side, so no gray row follows a "normal" report. The tasks send with
``registerProducer=false`` on the side decided here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from graymq.client.producer import Producer
from graymq.core.gray_side import send_side


class JobProducer(Producer):
    """Registered as role ``producer`` with the job's client id and labels; sends nothing itself."""

    def __init__(self, group: str, nameserver: str, *, client_id: str, labels: Mapping[str, str], gray: bool,
                 token: str | None, heartbeat_interval_s: float) -> None:
        super().__init__(group, nameserver, client_id=client_id, labels=dict(labels), gray=gray, token=token,
                         heartbeat_interval_s=heartbeat_interval_s)
        self.writing = gray  # the side of the running query's writes (what is reported)

    def side(self, job_gray: bool) -> bool:
        """The side the job's writes take now, for a job consuming on ``job_gray``."""
        return send_side(self.gray, None, job_gray, marks_honoured=self.gray_marks, gray_switch=self.gray_switch)

    async def declare(self, gray: bool) -> None:
        """Declare the job's consumer side as this producer's flag when it changed (a flag set on it still wins)."""
        if gray == self.membership.declared_gray:
            return
        self.membership.declared_gray = gray
        self.gray = gray
        self.membership.changed()
        await self.membership.beat()

    async def report_writing(self, gray: bool) -> bool:
        """The query now writes on ``gray``: report it at once; False when no name server heard it."""
        self.writing = gray
        self.membership.changed()
        return await self.membership.beat() is not None

    def _report(self) -> dict[str, Any]:
        report = super()._report()
        gray = self.writing and self.started
        return {**report, "gray": gray, "state": "GRAY" if gray else "NORMAL", "gray_marks": self.gray_marks and gray}
