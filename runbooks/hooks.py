"""What a runbook's owner can hear and do while it runs.

A runbook (promote, rollback, rollout) is driven by the CLI, the console and the pipeline alike. They differ only
in what they do around it: the console needs the operation's id as soon as it is recorded and a way to stop a
rollout's weight steps; the CLI prints progress. ``RunbookHooks`` carries those listeners, so no caller subclasses
a runner or reaches into its private steps (the defaults every caller shares are in ``runbooks.policy``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


class RunReport(Protocol):
    """What a listener reads of a run's report (``runbooks.cutover.CutoverReport`` and its kinds)."""

    operation_id: int
    message: str


def _ignore(report: RunReport, what: str = "") -> None:
    """A listener that hears and does nothing."""


@dataclass
class RunbookHooks:
    """Listeners of one run: ``started(report)`` once its operation is recorded (its id known; also when it
    resumes one), ``step(report, step)`` as each step is recorded, ``steps_ended(report)`` when a rollout leaves
    its weight steps (passed, failed or aborted: it no longer rolls back on a check)."""

    started: Callable[[RunReport], None] = _ignore
    step: Callable[[RunReport, str], None] = _ignore
    steps_ended: Callable[[RunReport], None] = _ignore
