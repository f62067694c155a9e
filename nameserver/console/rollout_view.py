"""A rollout's record as the console shows it: each weight step with where it stands, and each check's figures
against the thresholds they were judged by (``runbooks.rollout.judge``'s rules, from the policy the record
carries)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from graymq.nameserver.schemas import CutoverView
from graymq.protocol.health import failure_rate

StepStatus = Literal["passed", "checking", "failed", "aborted", "stopped", "pending", "skipped"]


@dataclass(frozen=True, slots=True)
class StepRow:
    number: int  # from 1
    weight: int
    status: StepStatus


@dataclass(frozen=True, slots=True)
class Figure:
    """A figure and the threshold it is held to (None: no threshold), as text; ``over``: it failed it."""

    value: str
    limit: str | None
    over: bool


@dataclass(frozen=True, slots=True)
class CheckRow:
    weight: int
    seconds: float
    deliveries: Figure
    failure_rate: Figure
    p99_ms: Figure
    lag: Figure  # "—": not measured (no --max-lag)
    normal: str  # the normal side's figures over the same interval
    verdict: str
    reasons: list[str]


@dataclass(frozen=True, slots=True)
class RolloutView:
    steps: list[StepRow]
    checks: list[CheckRow]
    thresholds: str


def rollout_view(op: CutoverView) -> RolloutView | None:
    """None for another kind of operation, or a rollout that has not recorded its policy yet.

    >>> from datetime import UTC, datetime
    >>> now = datetime(2026, 1, 1, tzinfo=UTC)
    >>> policy = {"steps": [10, 50], "step_seconds": 2.0, "max_failure_rate": 5.0, "failure_margin": 5.0,
    ...           "max_p99_ms": None, "max_lag": None, "min_messages": 10, "failed_checks": 1, "then": "promote"}
    >>> check = {"weight": 10, "seconds": 2.1, "verdict": "pass", "reasons": [], "lag": None,
    ...          "gray": {"consumed": 40, "failed": 0, "p99_ms": 3.0},
    ...          "normal": {"consumed": 90, "failed": 0, "p99_ms": 2.0}}
    >>> op = CutoverView(id=1, group="G", kind="rollout", mode="promote", producer_groups=["G"], state="RUNNING",
    ...                  step="step 2/2: weight 50%", started_by="ops", started_at=now, updated_at=now,
    ...                  finished_at=None,
    ...                  result={"policy": policy, "checks": [check], "step_index": 1, "phase": "steps"})
    >>> view = rollout_view(op)
    >>> [(s.weight, s.status) for s in view.steps]
    [(10, 'passed'), (50, 'checking')]
    >>> c = view.checks[0]; c.deliveries, c.failure_rate.value, c.failure_rate.limit
    (Figure(value='40', limit='≥ 10', over=False), '0.0%', '≤ 5.0%')
    """
    result = op.result or {}
    policy = result.get("policy")
    if op.kind != "rollout" or not policy:
        return None
    checks = [_check_row(policy, check) for check in result.get("checks") or []]
    return RolloutView(_steps(op, result, policy), checks, _thresholds(policy))


def _steps(op: CutoverView, result: dict[str, Any], policy: dict[str, Any]) -> list[StepRow]:
    index = int(result.get("step_index") or 0)
    stopped = result.get("phase") == "rollback" or op.state != "RUNNING"
    last = (result.get("checks") or [{}])[-1]
    rows = []
    for i, weight in enumerate(policy["steps"]):
        status: StepStatus
        if i < index:
            status = "passed"
        elif i > index:
            status = "skipped" if stopped else "pending"
        elif not stopped:
            status = "checking"
        elif last.get("verdict") == "fail" and last.get("weight") == weight:
            status = "failed"
        else:  # rolled back by an abort, or the rollout failed (timed out) while checking this step
            status = "aborted" if result.get("phase") == "rollback" else "stopped"
        rows.append(StepRow(i + 1, weight, status))
    return rows


def _check_row(policy: dict[str, Any], check: dict[str, Any]) -> CheckRow:
    gray, normal = check["gray"], check["normal"]
    deliveries = int(gray["consumed"] + gray["failed"])
    limit = max(policy["max_failure_rate"], failure_rate(normal) + policy["failure_margin"])
    rate = failure_rate(gray)
    max_p99, max_lag = policy.get("max_p99_ms"), policy.get("max_lag")
    gray_lag = (check.get("lag") or {}).get("gray")
    normal_text = (f"{int(normal['consumed'] + normal['failed']):,} msgs, {failure_rate(normal):.1f}% failed, "
                   f"p99 {normal['p99_ms']:.1f} ms")
    return CheckRow(
        weight=check["weight"], seconds=check.get("seconds", 0.0),
        deliveries=Figure(f"{deliveries:,}", f"≥ {policy['min_messages']:,}", False),
        failure_rate=Figure(f"{rate:.1f}%", f"≤ {limit:.1f}%", rate > limit),
        p99_ms=Figure(f"{gray['p99_ms']:.1f} ms", None if max_p99 is None else f"≤ {max_p99:g} ms",
                      max_p99 is not None and gray["p99_ms"] > max_p99),
        lag=Figure("—" if gray_lag is None else f"{gray_lag:,}", None if max_lag is None else f"≤ {max_lag:,}",
                   max_lag is not None and gray_lag is not None and gray_lag > max_lag),
        normal=normal_text, verdict=check["verdict"], reasons=list(check.get("reasons") or []))


def _thresholds(policy: dict[str, Any]) -> str:
    parts = [f"{policy['step_seconds']:g} s per step", f"≥ {policy['min_messages']:,} gray deliveries",
             f"failure rate ≤ max({policy['max_failure_rate']:g}%, normal + {policy['failure_margin']:g} points)"]
    if policy.get("max_p99_ms") is not None:
        parts.append(f"p99 ≤ {policy['max_p99_ms']:g} ms")
    if policy.get("max_lag") is not None:
        parts.append(f"gray lag ≤ {policy['max_lag']:,}")
    parts.append(f"{policy['failed_checks']} failed check(s) in a row roll back, then {policy['then']}")
    return "; ".join(parts)
