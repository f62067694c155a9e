"""Rollout: a consumer canary in weighted steps, each judged on the gray side's health, ending promoted, held, or
rolled back by itself — recorded as a ``rollout`` operation in the name server, resumable like promote.

For each weight of ``--steps``: set the group's weight (the gray consumers take that share of the normal queues),
let ``--step-seconds`` pass, then compare what the gray side did in that interval (the consumers' health reports,
``protocol.health``) with the thresholds:

- failure rate (failed deliveries over all) above max(``--max-failure-rate``, normal side's + ``--failure-margin``):
  a bad release fails more than v1 does on the same traffic, a broken dependency fails both;
- p99 consume latency above ``--max-p99-ms`` and gray lag above ``--max-lag``, when given.

A check with fewer than ``--min-messages`` gray deliveries waits for more (up to ``--timeout``, then FAILED, the
weight left as it is). ``--failed-checks K`` failed checks in a row roll back; a failed check below K keeps the
weight and checks again. Every step passed: ``--then promote`` runs promote's steps (drain, flip) inside the
rollout's operation, ``hold`` leaves the last weight.

Rollback (lossless): weight 0, the gray side RETIRED (its consumers hand back every queue and consume nothing while
they run on), orphan policy ``adopt`` (the normal consumers take the gray queues, the gray retry queues, and with
them whatever v2 failed), gray producers made normal; done once every gray consumer is retired holding nothing and
the gray backlog is 0. The retired consumers are listed as safe to stop; the orphan policy stays ``adopt`` and the
gray side stays retired until the next rollout starts (or ``graymq gray retire GROUP --off``).

A rollout of another lane (``lane``, docs/lanes.md) steps that lane's weight, judges that lane's consumers against
the base consumers (other lanes' figures are left out) and promotes or rolls back that lane alone: its rollback is
the lane's weight 0 and the lane's rollback (its producers made base, its consumers draining its queues). Other
lanes, their weights and the group's settings are untouched.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field
from typing import Any

from graymq.client.backlog import BacklogUnavailable
from graymq.core.queue_layout import GRAY_LANE
from graymq.nameserver_api.client import NameServerClient
from graymq.protocol.health import failure_rate, since
from graymq.protocol.membership import ClientState
from graymq.protocol.operations import (
    CutoverKind,
    CutoverMode,
    CutoverState,
    CutoverStep,
    RolloutOutcome,
    RolloutPhase,
    weight_step,
)
from graymq.runbooks.cutover import CutoverFailed, CutoverReport, CutoverRunner
from graymq.runbooks.group_state import GroupStatus
from graymq.runbooks.hooks import RunbookHooks
from graymq.runbooks.policy import CutoverPolicy, RolloutPolicy
from graymq.runbooks.progress import Progress

OUTCOMES = {CutoverState.ABORTED: RolloutOutcome.ROLLED_BACK, CutoverState.FAILED: RolloutOutcome.FAILED,
            CutoverState.RUNNING: RolloutOutcome.RUNNING}


@dataclass
class RolloutReport(CutoverReport):
    policy: dict[str, Any] = field(default_factory=dict)
    checks: list[dict[str, Any]] = field(default_factory=list)  # one per check, in order
    step_index: int = 0  # the step being checked (len(steps): all passed)
    failed_in_a_row: int = 0
    phase: RolloutPhase = RolloutPhase.STEPS
    safe_to_stop: list[str] = field(default_factory=list)  # retired gray consumers after a rollback
    lane: str = GRAY_LANE  # the lane rolled out

    RESUMED_FIELDS = (*CutoverReport.RESUMED_FIELDS, "policy", "checks", "step_index", "failed_in_a_row", "phase")

    @property
    def outcome(self) -> RolloutOutcome:
        if self.state == CutoverState.SUCCEEDED:
            return RolloutOutcome.PROMOTED if self.phase == RolloutPhase.PROMOTE else RolloutOutcome.HELD
        return OUTCOMES[self.state]

    def to_json(self) -> dict[str, Any]:
        """The report; ``lane`` only for a lane other than ``gray`` (a rollout without lanes reads as before)."""
        data = {**super().to_json(), "outcome": self.outcome}
        if data["lane"] == GRAY_LANE:
            del data["lane"]
        return data


class RolloutRunner(CutoverRunner):
    """Runs a rollout of ``group`` by ``rollout_policy`` (its steps and thresholds), as ``policy`` says (the shared
    defaults when not given: its producer groups, timeouts and waits)."""

    report_type = RolloutReport

    def __init__(self, nameserver: NameServerClient, group: str, rollout_policy: RolloutPolicy,
                 policy: CutoverPolicy | None = None, progress: Progress | None = None,
                 hooks: RunbookHooks | None = None, *, lane: str = GRAY_LANE) -> None:
        super().__init__(nameserver, group, policy, progress, hooks, lane=lane)
        self.rollout_policy = rollout_policy
        self.past_steps = False  # the weight steps ended: an abort no longer rolls back
        self._holding: str | None = None  # the last "holding weight" line printed
        self._aborted = asyncio.Event()
        self._abort_message = ""

    def abort(self, message: str) -> bool:
        """End the weight steps as a failed check ends them (the rollout rolls back, ``message`` its reason); False
        when it is past them (promoting, or holding its last weight)."""
        if self.past_steps:
            return False
        self._abort_message = message
        self._aborted.set()
        return True

    async def rollout(self) -> RolloutReport:
        report: RolloutReport = await self._begin(CutoverKind.ROLLOUT, CutoverMode(self.rollout_policy.then))
        if report.resumed and report.policy:
            self.rollout_policy = RolloutPolicy(**report.policy)  # a resumed rollout goes on as it started
            self.progress.note(f"resuming with the recorded steps {list(self.rollout_policy.steps)} and thresholds")
        report.policy = self.rollout_policy.to_json()
        report.lane = self.lane
        return await self._run(report, self._rollout_steps)  # type: ignore[no-any-return]

    async def _rollout_steps(self, report: RolloutReport) -> None:
        if report.phase == RolloutPhase.STEPS:
            await self._preflight(report)
            passed = await self._abortable_steps(report)
            report.phase = RolloutPhase(self.rollout_policy.then) if passed else RolloutPhase.ROLLBACK
        self._restart_clock()
        if report.phase == RolloutPhase.ROLLBACK:
            await (self._rollback(report) if self.lane == GRAY_LANE else self._rollback_lane(report))
            report.state = CutoverState.ABORTED
        elif report.phase == RolloutPhase.PROMOTE:
            await self._step(report, CutoverStep.PROMOTE)
            await self._promote_steps(report)

    async def _preflight(self, report: RolloutReport) -> None:
        """A rollout needs the gray switch on and a live gray push consumer (waited for the policy's
        ``wait_for_gray_s``: one
        started just before the rollout may not have registered yet); a retired gray side comes back."""
        status = await self._gray_consumer_registered()
        if not status.gray_switch:
            raise CutoverFailed(f"the gray switch of {self.group} is off: a weight has no effect",
                                report.to_json())
        spark = [c.client_id for c in status.gray_clients(("spark",))]
        if spark:
            raise CutoverFailed(f"gray Spark jobs in {self.group} ({', '.join(spark)}) take no weight: use "
                                "graymq gray promote/rollback", report.to_json())
        if not status.gray_clients(("consumer",)):
            raise CutoverFailed(f"{self.group} has no live {self._side} consumer: nothing to canary",
                                report.to_json())
        if status.gray_retired and self.lane == GRAY_LANE:
            await self.nameserver.set_retired(self.group, False, f"rollout #{report.operation_id} starts")
            self.progress.note("the gray side was retired: it consumes again")

    async def _gray_consumer_registered(self) -> GroupStatus:
        """The group's status once a live gray consumer (or a retired one) is in it, or when the wait is over."""
        wait_s = self.policy.wait_for_gray_s
        deadline = time.monotonic() + wait_s
        status = await self.inspector.status(self.group, with_backlog=False, lane=self.lane)
        if not status.gray_clients(("consumer",)) and wait_s > 0:
            self.progress.note(f"waiting up to {wait_s:g} s for a {self._side} consumer of {self.group}")
        while not status.gray_clients(("consumer",)) and time.monotonic() < deadline:
            await asyncio.sleep(self.policy.check_poll_s)
            status = await self.inspector.status(self.group, with_backlog=False, lane=self.lane)
        return status

    async def _abortable_steps(self, report: RolloutReport) -> bool:
        """The weight steps, ended as a failed check ends them once ``abort`` is called."""
        steps = asyncio.ensure_future(self._weighted_steps(report))
        aborted = asyncio.ensure_future(self._aborted.wait())
        try:
            await asyncio.wait({steps, aborted}, return_when=asyncio.FIRST_COMPLETED)
        finally:  # aborted, or this task cancelled: the steps stop here
            aborted.cancel()
            if not steps.done():
                steps.cancel()
                await asyncio.gather(steps, return_exceptions=True)
        self.past_steps = True
        passed = False if steps.cancelled() else steps.result()
        if steps.cancelled():
            report.message = self._abort_message
        self.hooks.steps_ended(report)
        return passed

    async def _weighted_steps(self, report: RolloutReport) -> bool:
        """Check each step's weight in turn; False once ``failed_checks`` checks in a row failed."""
        steps = self.rollout_policy.steps
        while report.step_index < len(steps):
            weight = steps[report.step_index]
            await self._set_weight(weight, f"rollout #{report.operation_id} step {report.step_index + 1}/{len(steps)}")
            await self._step(report, weight_step(report.step_index, len(steps), weight))
            check = await self._check(report, weight)
            report.checks.append(check)
            self.progress.note(_check_line(report.step_index, len(steps), check))
            if check["verdict"] == "pass":
                report.step_index, report.failed_in_a_row = report.step_index + 1, 0
            else:
                report.failed_in_a_row += 1
                if report.failed_in_a_row >= self.rollout_policy.failed_checks:
                    report.message = f"rolled back at weight {weight}%: {'; '.join(check['reasons'])}"
                    return False
        return True

    async def _check(self, report: RolloutReport, weight: int) -> dict[str, Any]:
        """Wait one step interval, then judge the gray side on what both sides did meanwhile."""
        before = self._health_by_client(await self.inspector.status(self.group, with_backlog=False))
        started = time.monotonic()
        policy = self.rollout_policy
        total = math.ceil(policy.step_seconds)
        while (left := policy.step_seconds - (time.monotonic() - started)) > 0:
            self.progress.update(total - math.ceil(left), total, f"weight {weight}%: {math.ceil(left)} s to the check")
            await asyncio.sleep(min(self.policy.check_poll_s, left))
        self._restart_clock()
        while True:
            try:
                status = await self.inspector.status(self.group, with_lag=policy.max_lag is not None)
            except BacklogUnavailable as exc:
                await self._hold(report, weight, exc)
                continue
            if self._holding:
                self.progress.note(f"the brokers answer again: checking weight {weight}%")
                self._holding = None
            figures = since(before, self._health_by_client(status))
            gray, normal = figures["gray"], figures["normal"]
            deliveries = int(gray["consumed"] + gray["failed"])
            if deliveries >= policy.min_messages:
                break
            self._check_deadline(report, f"weight {weight}%: {deliveries} gray deliveries since the step began, "
                                         f"fewer than --min-messages {policy.min_messages}")
            self.progress.update(deliveries, policy.min_messages, f"weight {weight}%: waiting for gray traffic")
            await asyncio.sleep(self.policy.check_poll_s)
        reasons = judge(policy, gray, normal, status.lag)
        return {"weight": weight, "seconds": round(time.monotonic() - started, 3), "gray": gray, "normal": normal,
                "lag": status.lag, "verdict": "fail" if reasons else "pass", "reasons": reasons}

    async def _hold(self, report: RolloutReport, weight: int, why: BacklogUnavailable) -> None:
        """A broker that does not answer: keep the weight, neither judge nor fail, say why (once per cause)."""
        self._check_deadline(report, f"weight {weight}% held: {why.message}")
        line = f"holding weight {weight}% (no check while {why.message})"
        if line != self._holding:
            self.progress.note(line)
            self._holding = line
        await asyncio.sleep(self.policy.check_poll_s)

    @property
    def _side(self) -> str:
        return "gray" if self.lane == GRAY_LANE else f"lane {self.lane}"

    async def _set_weight(self, weight: int, why: str) -> None:
        """The rolled-out lane's weight (``gray``: the group's)."""
        if self.lane == GRAY_LANE:
            await self.nameserver.set_weight(self.group, weight, why)
        else:
            await self.nameserver.set_lane_weight(self.group, self.lane, weight, f"lane {self.lane}: {why}")

    def _health_by_client(self, status: GroupStatus) -> dict[str, Any]:
        """The health reports of the rolled-out lane's consumers and the base ones (their "gray" side is the lane's;
        other lanes' consumers are left out)."""
        return {c.client_id: c.health for c in status.clients if c.role == "consumer"
                and c.in_lane in (None, self.lane)}

    async def _rollback_lane(self, report: RolloutReport) -> None:
        """A lane other than ``gray``: its weight 0 at once, then the lane's rollback (its producers base, its
        consumers draining its queues); other lanes and the group's settings are left as they are."""
        await self._step(report, CutoverStep.ROLLBACK)
        await self._set_weight(0, f"rollout #{report.operation_id} rolled back")
        reason = report.message
        self.progress.note(f"rolling back lane {self.lane}: weight 0, its consumers drain — {reason}")
        await self._rollback_steps(report)
        if report.message != reason:  # the consumers left in the lane, safe to stop
            report.message = f"{reason}; {report.message}"

    async def _rollback(self, report: RolloutReport) -> None:
        """Take the traffic away from v2 at once, then make sure everything it held is consumed by v1."""
        await self._step(report, CutoverStep.ROLLBACK)
        why = f"rollout #{report.operation_id} rolled back"
        await self.nameserver.set_weight(self.group, 0, why)
        await self.nameserver.set_orphan_policy(self.group, "adopt", why)
        await self.nameserver.set_retired(self.group, True, f"{why}: {report.message}")
        self.progress.note(f"rolling back: weight 0, gray side retired — {report.message}")
        await self._timed(report, CutoverStep.PRODUCERS, self._stop_gray_producers(report))
        for producer_group in self.producer_groups:
            if producer_group != self.group:  # new producer pods start normal
                report.rules_removed += await self._remove_gray_rules(producer_group)
        await self._timed(report, CutoverStep.ROLLBACK, self._wait(
            report, "gray consumers retiring, normal consumers adopting the gray queues", _rolled_back))
        status = await self.inspector.status(self.group, with_backlog=False)
        report.safe_to_stop = [c.client_id for c in status.retired_clients()]
        if report.safe_to_stop:
            report.message += f"; retired, safe to stop: {', '.join(report.safe_to_stop)}"


def judge(policy: RolloutPolicy, gray: dict[str, float], normal: dict[str, float],
          lag: dict[str, int] | None) -> list[str]:
    """Why the gray side fails the thresholds of ``policy`` (empty: it passes).

    >>> p = RolloutPolicy([10], 1.0, max_failure_rate=5.0, failure_margin=5.0, max_p99_ms=100.0)
    >>> side = lambda consumed, failed, p99=1.0: {"consumed": consumed, "failed": failed, "p99_ms": p99}
    >>> judge(p, side(90, 10), side(100, 0), None)
    ['gray failure rate 10.0% > 5.0%']
    >>> judge(p, side(70, 30), side(75, 25), None)   # v1 fails as much: a dependency, not the release
    []
    >>> judge(p, side(100, 0, p99=250.0), side(100, 0), None)
    ['gray p99 250.0 ms > 100 ms']
    """
    reasons = []
    limit = max(policy.max_failure_rate, failure_rate(normal) + policy.failure_margin)
    if failure_rate(gray) > limit:
        reasons.append(f"gray failure rate {failure_rate(gray):.1f}% > {limit:.1f}%")
    if policy.max_p99_ms is not None and gray["p99_ms"] > policy.max_p99_ms:
        reasons.append(f"gray p99 {gray['p99_ms']:.1f} ms > {policy.max_p99_ms:g} ms")
    gray_lag = (lag or {}).get("gray", 0)
    if policy.max_lag is not None and gray_lag > policy.max_lag:
        reasons.append(f"gray lag {gray_lag} > {policy.max_lag}")
    return reasons


def _rolled_back(status: GroupStatus) -> bool:
    """Every gray consumer retired and holding nothing, and the gray backlog consumed."""
    gray = status.gray_clients(("consumer",))
    return all(c.state == ClientState.RETIRED and not c.queues for c in gray) and status.gray_backlog == 0


def _check_line(index: int, steps: int, check: dict[str, Any]) -> str:
    """``step 1/3 weight 5%: gray 120 msgs, 1.7% failed, p99 3.2 ms | normal 2,300 msgs, 0.0% failed, ... → pass``."""
    def side(name: str) -> str:
        figures = check[name]
        lag = f", lag {check['lag'][name]}" if check.get("lag") else ""
        return (f"{name} {int(figures['consumed'] + figures['failed']):,} msgs, {failure_rate(figures):.1f}% failed, "
                f"p99 {figures['p99_ms']:.1f} ms{lag}")

    verdict = check["verdict"] + (f" ({'; '.join(check['reasons'])})" if check["reasons"] else "")
    return f"step {index + 1}/{steps} weight {check['weight']}%: {side('gray')} | {side('normal')} → {verdict}"
