"""How a promote, rollback or rollout runs, with the defaults every caller shares: ``CutoverPolicy`` (the release's
producer groups, a rollback's mode, the timeouts and waits of any run) and ``RolloutPolicy`` (a rollout's steps and
the thresholds its checks judge by).

The CLI (``graymq gray promote|rollback|rollout``), the console's form and its REST body each build these through
one function of their own from what they were given; what they leave out is the default here, so a promote started
from either runs alike. A value out of range is a ``ConfigError`` naming the CLI option (the console answers it as
a 400).
"""

from __future__ import annotations

from dataclasses import dataclass

from graymq.protocol.errors import ConfigError
from graymq.protocol.operations import CutoverMode

RUNBOOK_TIMEOUT_S = 300.0  # a promote's, rollback's or rollout's --timeout: the longest wait of one step
WAIT_FOR_GRAY_S = 30.0  # a rollout's --wait-for-gray: how long its start waits for a gray consumer to register
ROLLOUT_THEN = ("promote", "hold")  # what a rollout does once its last step passed


def _refuse(checks: dict[str, bool]) -> None:
    wrong = [name for name, ok in checks.items() if not ok]
    if wrong:
        raise ConfigError(f"out of range: {', '.join(wrong)} (see graymq gray rollout --help)")


@dataclass(frozen=True)
class CutoverPolicy:
    """How one promote, rollback or rollout of a group runs.

    >>> policy = CutoverPolicy()
    >>> policy.producer_groups_of("orders"), policy.mode, policy.timeout_s
    (['orders'], <CutoverMode.DRAIN: 'drain'>, 300.0)
    >>> CutoverPolicy(timeout_s=0)
    Traceback (most recent call last):
    ...
    graymq.protocol.errors.ConfigError: out of range: --timeout (see graymq gray rollout --help)
    """

    producer_groups: tuple[str, ...] = ()  # the release's producer groups; none given: the group's own name
    mode: CutoverMode = CutoverMode.DRAIN  # a rollback's: gray consumers drain, or normal ones adopt
    timeout_s: float = RUNBOOK_TIMEOUT_S  # the longest wait of one step
    wait_for_gray_s: float = WAIT_FOR_GRAY_S  # a rollout's start: how long it waits for a gray consumer
    poll_s: float = 0.05  # between two reads of the group while a step waits (producers, drain, verify)
    check_poll_s: float = 0.25  # a rollout's: between two looks while a weight's interval passes or traffic comes

    def __post_init__(self) -> None:
        object.__setattr__(self, "producer_groups", tuple(self.producer_groups))
        object.__setattr__(self, "mode", CutoverMode(self.mode))
        _refuse({"--timeout": self.timeout_s > 0, "--wait-for-gray": self.wait_for_gray_s >= 0,
                 "poll_s": self.poll_s > 0 and self.check_poll_s > 0})

    def producer_groups_of(self, group: str) -> list[str]:
        """The producer groups a run of ``group`` flips: those given, else the one named like the group."""
        return list(self.producer_groups) or [group]


@dataclass(frozen=True)
class RolloutPolicy:
    """A rollout's weight steps and what each step's check judges (``runbooks.rollout``); recorded with the
    operation (``to_json``), so a resumed rollout goes on with the steps and thresholds it started with."""

    steps: tuple[int, ...]
    step_seconds: float
    max_failure_rate: float = 5.0  # percent
    failure_margin: float = 5.0  # percentage points above the normal side's rate still tolerated
    max_p99_ms: float | None = None
    max_lag: int | None = None
    min_messages: int = 10
    failed_checks: int = 1
    then: str = "promote"

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps", tuple(self.steps))
        if not self.steps or any(not 1 <= w <= 100 for w in self.steps):
            raise ConfigError(f"--steps must be weights from 1 to 100, got {list(self.steps)}")
        _refuse({"--step-seconds": self.step_seconds > 0, "--max-failure-rate": 0 <= self.max_failure_rate <= 100,
                 "--failure-margin": self.failure_margin >= 0, "--min-messages": self.min_messages >= 1,
                 "--failed-checks": self.failed_checks >= 1,
                 "--max-p99-ms": self.max_p99_ms is None or self.max_p99_ms > 0,
                 "--max-lag": self.max_lag is None or self.max_lag >= 0, "--then": self.then in ROLLOUT_THEN})

    def to_json(self) -> dict[str, object]:
        """The policy as the rollout's report records it (``RolloutPolicy(**recorded)`` gives it back)."""
        return {"steps": list(self.steps), "step_seconds": self.step_seconds,
                "max_failure_rate": self.max_failure_rate, "failure_margin": self.failure_margin,
                "max_p99_ms": self.max_p99_ms, "max_lag": self.max_lag, "min_messages": self.min_messages,
                "failed_checks": self.failed_checks, "then": self.then}
