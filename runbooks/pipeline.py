"""Promote or roll back a pipeline of consumer groups, one stage after the other, upstream first.

A pipeline stage is a consumer group that consumes one topic and, through a producer of its own, writes the next
(``producers → A → STAGE → B → SINK``); a gray release of the pipeline is gray in every stage, so what STAGE's gray
consumers write lands in B's gray queues for SINK's gray consumers. ``graymq gray promote STAGE --then SINK``
(``rollback`` likewise) runs the cutover runbook (``cutover.py``) on STAGE, and only once it SUCCEEDED on SINK.

What "drained downstream" needs, and why the order gives it: once STAGE's promote succeeded, no producer of its
producer groups sends gray, its gray consumers have drained A's gray queues and flipped, so nothing adds to B's gray
queues any more; what STAGE wrote there while gray is still in them. SINK's own promote then gives its gray consumers
a normal flag, and each drains its gray queues (those of every topic it consumes, B included) before it flips; the
step waits until the group's gray backlog is 0. So promoting the next stage already waits for the previous stage's
gray output to be consumed downstream: the pipeline adds the order, a check of every stage before the first one
starts, and one report. The order matters: a downstream stage promoted first would be left with no gray consumer
while the upstream one still writes gray into its topic (held there, under the orphan policy ``hold``). A rollback
(``drain`` or ``adopt``) follows the same order for the same reason.

Each stage is its own recorded operation (``gray history`` and the console show them). A stage that fails stops the
pipeline: the report says which stages are done and which are not; a stage interrupted stays RUNNING and the same
command resumes it (the stages done before it are run again and find nothing to do).

A pipeline of one lane (``--lane v3``, docs/lanes.md) runs each stage's cutover of that lane alone: the stages' other
lanes run on untouched, and an operation of another lane running on a stage is no conflict.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from graymq.core.queue_layout import GRAY_LANE
from graymq.nameserver_api.client import ConflictError, NameServerClient, NotFoundError
from graymq.protocol.errors import ConfigError, GrayMQError
from graymq.protocol.names import check_group_name
from graymq.protocol.operations import CutoverKind, CutoverMode, CutoverState
from graymq.runbooks.cutover import CutoverFailed, CutoverReport, CutoverRunner
from graymq.runbooks.policy import CutoverPolicy
from graymq.runbooks.progress import Progress


@dataclass(frozen=True, slots=True)
class PipelineStage:
    """A consumer group of the pipeline and the producer groups of its release (empty: the group itself)."""

    group: str
    producer_groups: tuple[str, ...] = ()


def check_stages(stages: Sequence[PipelineStage]) -> None:
    """Refuse, before any request, a pipeline naming a group twice or a malformed name (a ``ConfigError``).

    >>> check_stages([PipelineStage("STAGE", ("PIPE_IN",)), PipelineStage("SINK")])
    >>> check_stages([PipelineStage("STAGE"), PipelineStage("SINK"), PipelineStage("STAGE")])
    Traceback (most recent call last):
    ...
    graymq.protocol.errors.ConfigError: group STAGE is named twice in the pipeline: each stage is a different group
    """
    seen: set[str] = set()
    for stage in stages:
        for name in (stage.group, *stage.producer_groups):
            if problem := check_group_name(name):
                raise ConfigError(problem)
        if stage.group in seen:
            raise ConfigError(f"group {stage.group} is named twice in the pipeline: each stage is a different group")
        seen.add(stage.group)


@dataclass
class PipelineReport:
    """The stages in order and, for each one run so far, its cutover report (as JSON)."""

    kind: CutoverKind
    mode: CutoverMode
    stages: list[PipelineStage]
    results: list[dict[str, Any]] = field(default_factory=list)
    state: CutoverState = CutoverState.RUNNING
    message: str = ""
    lane: str = GRAY_LANE  # the lane each stage promotes or rolls back

    @property
    def groups_done(self) -> list[str]:
        return [r["group"] for r in self.results if r.get("state") == CutoverState.SUCCEEDED]

    @property
    def groups_left(self) -> list[str]:
        done = set(self.groups_done)
        return [s.group for s in self.stages if s.group not in done]

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "mode": self.mode, "group": self.stages[0].group, "state": self.state,
                "message": self.message, "groups_done": self.groups_done, "groups_left": self.groups_left,
                "stages": self.results, **({"lane": self.lane} if self.lane != GRAY_LANE else {})}


class PipelineFailed(GrayMQError):
    """A stage failed; ``report`` holds the stages done, the failed one's report and the stages not run."""

    def __init__(self, message: str, report: PipelineReport) -> None:
        super().__init__(message)
        self.report = report


class PipelineRunner:
    """Runs the cutover runbook of ``lane`` on each stage in order, each as ``policy`` says (a rollback's mode, the
    timeout of each stage; a stage's producer groups are its own); ``report`` is up to date even when the run is
    cancelled."""

    def __init__(self, nameserver: NameServerClient, stages: Sequence[PipelineStage], kind: CutoverKind,
                 policy: CutoverPolicy | None = None, progress: Progress | None = None, *,
                 lane: str = GRAY_LANE) -> None:
        check_stages(stages)
        self.nameserver = nameserver
        self.policy = policy or CutoverPolicy()
        self.progress = progress or Progress()
        self.report = PipelineReport(kind, self.policy.mode, list(stages), lane=lane)

    async def check(self) -> None:
        """Before the first stage: every group is known to the name server (a ``ConfigError`` otherwise) and none
        runs an operation of the lane this one would not resume (a ``ConflictError``), so a bad stage stops nothing
        half way."""
        report = self.report
        for stage in report.stages:
            try:
                await self.nameserver.get_group(stage.group)
            except NotFoundError:
                raise ConfigError(f"group {stage.group} is not known to the name server") from None
            for op in await self.nameserver.list_cutovers(stage.group, state=CutoverState.RUNNING):
                if op.lane == report.lane and (op.kind, op.mode) != (report.kind, report.mode):
                    raise ConflictError(f"a {op.kind} ({op.mode}) operation #{op.id} is running on {stage.group}; "
                                        "nothing of the pipeline was started", op.to_json())

    async def run(self) -> PipelineReport:
        """``check``, then each stage in order; a failed stage raises ``PipelineFailed`` and runs no later stage."""
        await self.check()
        report = self.report
        for number, stage in enumerate(report.stages, 1):
            lane = f" (lane {report.lane})" if report.lane != GRAY_LANE else ""
            self.progress.note(f"stage {number}/{len(report.stages)}: {report.kind} {stage.group}{lane}")
            result = await self._run_stage(stage)
            report.results.append(result)
            if result.get("state") != CutoverState.SUCCEEDED:
                report.state = CutoverState.FAILED
                report.message = (f"stage {number}/{len(report.stages)} ({stage.group}) failed: "
                                  f"{result.get('message', '')}")
                raise PipelineFailed(report.message, report)
        report.state = CutoverState.SUCCEEDED
        return report

    async def _run_stage(self, stage: PipelineStage) -> dict[str, Any]:
        """The stage's cutover report as JSON (a failed stage's too); promote's gain ``nothing_to_promote``."""
        policy = replace(self.policy, producer_groups=stage.producer_groups)
        runner = CutoverRunner(self.nameserver, stage.group, policy, self.progress, lane=self.report.lane)
        try:
            if self.report.kind == CutoverKind.PROMOTE:
                done: CutoverReport = await runner.promote()
                return {**done.to_json(), "nothing_to_promote": done.changed_nothing()}
            return (await runner.rollback()).to_json()
        except CutoverFailed as exc:
            return exc.report
        except GrayMQError as exc:  # no cutover report: refused (a conflict) or the name server did not answer
            return {"group": stage.group, "kind": self.report.kind, "state": CutoverState.FAILED,
                    "message": f"{exc.message} (an operation it started stays RUNNING: the same command resumes it)"}
        finally:
            await runner.close()
