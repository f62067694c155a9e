"""Rollouts started from the console, run inside the name server as background tasks, and their abort.

A rollout runs the runbook ``graymq gray rollout`` runs (``RolloutRunner``), with the CLI's defaults and checks
(``runbooks.policy``), talking to this name server over its own address with the caller's token, like the console's
promote and rollback (``operations``). Abort makes the running rollout do what a failed check makes it do: leave its
steps and roll back (weight 0, the gray side retired, the normal consumers adopting the gray queues — nothing
lost), ending ABORTED with the outcome ROLLED_BACK and the abort's author in its message. Only the name server
running a rollout can abort it; one run by ``graymq gray rollout`` is stopped where it runs.
"""

from __future__ import annotations

import logging
from typing import Literal

from pydantic import BaseModel, Field

from graymq.core.queue_layout import GRAY_LANE
from graymq.nameserver.console.operations import LogStream, console_policy
from graymq.nameserver.errors import ApiError, Conflict
from graymq.nameserver.schemas import LaneName, Reason
from graymq.nameserver_api.client import NameServerClient
from graymq.protocol.errors import ConfigError, GrayMQError
from graymq.protocol.operations import MAX_P99_MS, MAX_STEP_S, MAX_TIMEOUT_S
from graymq.runbooks.cutover import CutoverFailed
from graymq.runbooks.hooks import RunbookHooks
from graymq.runbooks.policy import CutoverPolicy, RolloutPolicy
from graymq.runbooks.progress import Progress
from graymq.runbooks.rollout import RolloutRunner

log = logging.getLogger(__name__)

MAX_COUNT = 2**62  # messages: as the health reports count them
MAX_FAILED_CHECKS = 1000


class RolloutRequest(BaseModel):
    """The form's fields: ``graymq gray rollout``'s options, with its defaults. A number that is not finite or above
    its bound (the CLI's) is refused by the schema (422 naming the field); one below its range by ``policy``."""

    steps: list[int] = Field(min_length=1, max_length=100, description="weights in percent, e.g. [5, 25, 50]")
    step_seconds: float = Field(le=MAX_STEP_S, allow_inf_nan=False, description="time at each weight (≤ a day)")
    max_failure_rate: float = Field(RolloutPolicy.max_failure_rate, le=100, allow_inf_nan=False)
    failure_margin: float = Field(RolloutPolicy.failure_margin, le=100, allow_inf_nan=False)
    max_p99_ms: float | None = Field(RolloutPolicy.max_p99_ms, le=MAX_P99_MS, allow_inf_nan=False)
    max_lag: int | None = Field(RolloutPolicy.max_lag, le=MAX_COUNT)
    min_messages: int = Field(RolloutPolicy.min_messages, le=MAX_COUNT)
    failed_checks: int = Field(RolloutPolicy.failed_checks, le=MAX_FAILED_CHECKS)
    then: Literal["promote", "hold"] = RolloutPolicy.then
    timeout_s: float = Field(CutoverPolicy.timeout_s, le=MAX_TIMEOUT_S, allow_inf_nan=False,
                             description="longest wait for a check's messages, and for the promote (≤ a week)")
    lane: LaneName | None = Field(None, description="the lane rolled out alone (docs/lanes.md); none: gray")
    reason: Reason

    def policies(self) -> tuple[RolloutPolicy, CutoverPolicy]:
        """The runbook's policies (its steps and thresholds, how it runs); a value out of range is a 400 naming it
        (as the CLI's option)."""
        run = console_policy(timeout_s=self.timeout_s)
        try:
            return RolloutPolicy(self.steps, self.step_seconds, self.max_failure_rate, self.failure_margin,
                                 self.max_p99_ms, self.max_lag, self.min_messages, self.failed_checks,
                                 self.then), run
        except ConfigError as exc:
            raise ApiError(exc.message) from None


def form_defaults() -> dict[str, str]:
    """What the console's rollout form shows before it is filled in: the policies' defaults, as the CLI's options
    have them."""
    return {"max_failure_rate": f"{RolloutPolicy.max_failure_rate:g}",
            "failure_margin": f"{RolloutPolicy.failure_margin:g}", "min_messages": f"{RolloutPolicy.min_messages}",
            "failed_checks": f"{RolloutPolicy.failed_checks}", "then": RolloutPolicy.then,
            "timeout_s": f"{CutoverPolicy.timeout_s:g}"}


class AbortRequest(BaseModel):
    reason: Reason


def describe(group: str, policy: RolloutPolicy, lane: str | None = None) -> str:
    """What the rollout will do, for the confirmation (``lane``: of that lane alone).

    >>> describe("G", RolloutPolicy([5, 50], 30.0, max_p99_ms=200.0))
    'rolls G out at weights 5% → 50%, 30 s each; each step passes with ≥ 10 gray deliveries, gray failure rate ≤ \
max(5%, normal + 5 points), p99 ≤ 200 ms; 1 failed check rolls back; then promote'
    """
    limits = [f"gray failure rate ≤ max({policy.max_failure_rate:g}%, normal + {policy.failure_margin:g} points)"]
    if policy.max_p99_ms is not None:
        limits.append(f"p99 ≤ {policy.max_p99_ms:g} ms")
    if policy.max_lag is not None:
        limits.append(f"gray lag ≤ {policy.max_lag:,}")
    checks = policy.failed_checks
    what = group if lane in (None, GRAY_LANE) else f"lane {lane} of {group}"
    return (f"rolls {what} out at weights {' → '.join(f'{w}%' for w in policy.steps)}, {policy.step_seconds:g} s "
            f"each; each step passes with ≥ {policy.min_messages:,} gray deliveries, {', '.join(limits)}; "
            f"{checks} failed check{'' if checks == 1 else 's in a row'} roll{'s' if checks == 1 else ''} back; "
            f"then {policy.then}")


class ConsoleRollouts:
    """The rollouts this name server runs (started through ``ConsoleOperations``, one per group), for their abort."""

    def __init__(self) -> None:
        self._running: dict[str, tuple[RolloutRunner, list[int]]] = {}  # group -> its runner, its operation's id

    async def run(self, group: str, policies: tuple[RolloutPolicy, CutoverPolicy], nameserver_url: str,
                  token: str | None, lane: str | None = None) -> None:
        """Run the rollout of ``group`` (of ``lane`` alone when given) as the holder of ``token`` (None: dev mode),
        abortable while it runs."""
        nameserver = NameServerClient(nameserver_url, token=token, admin_token=token)
        operation_id: list[int] = []
        runner = RolloutRunner(nameserver, group, *policies, Progress(stream=LogStream()),
                               RunbookHooks(started=lambda report: operation_id.append(report.operation_id)),
                               lane=lane or GRAY_LANE)
        self._running[group] = (runner, operation_id)
        try:
            report = await runner.rollout()
            log.info("console rollout of %s: %s", group, report.outcome)
        except CutoverFailed as exc:  # the runner recorded the operation FAILED with its report
            log.warning("console rollout of %s failed: %s", group, exc.message)
        except GrayMQError as exc:
            log.error("console rollout of %s stopped, its record stays RUNNING (`graymq gray rollout %s` with the "
                      "same steps resumes it): %s", group, group, exc.message)
        finally:
            if self._running.get(group, (None,))[0] is runner:
                del self._running[group]
            await runner.close()
            await nameserver.close()

    def abort(self, operation_id: int, actor: str) -> None:
        """Make the rollout ``operation_id`` roll back; 409 when this name server does not run it or it is past its
        steps (promoting, or holding its last weight)."""
        runner = next((r for r, ids in self._running.values() if operation_id in ids), None)
        if runner is None:
            raise Conflict(f"rollout #{operation_id} is not run by this name server's console: stop it where it "
                           "runs (a `graymq gray rollout` that is interrupted stays RUNNING)")
        if not runner.abort(f"aborted from the console by {actor}"):
            raise Conflict(f"rollout #{operation_id} is past its weight steps: it no longer rolls back on a check")
