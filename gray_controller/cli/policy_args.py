"""The runbooks' policies from ``graymq gray promote|rollback|rollout``'s options: one function each, the options'
defaults read from the policies (``runbooks.policy``), which the console's form and REST body share."""

from __future__ import annotations

import argparse
from typing import Any

from graymq.runbooks.policy import CutoverPolicy, RolloutPolicy

DEFAULT = CutoverPolicy()


def cutover_policy(args: argparse.Namespace) -> CutoverPolicy:
    """``--producer-group`` (none: the group itself), a rollback's ``--drain|--adopt``, ``--timeout`` and a
    rollout's ``--wait-for-gray``; what a command does not take keeps the policy's default."""
    given: dict[str, Any] = {"producer_groups": tuple(getattr(args, "producer_group", None) or ()),
                             "mode": getattr(args, "mode", None) or DEFAULT.mode, "timeout_s": args.timeout}
    if getattr(args, "wait_for_gray", None) is not None:
        given["wait_for_gray_s"] = args.wait_for_gray
    return CutoverPolicy(**given)


def rollout_policy(args: argparse.Namespace) -> RolloutPolicy:
    """``graymq gray rollout``'s steps and thresholds."""
    return RolloutPolicy(args.steps, args.step_seconds, args.max_failure_rate, args.failure_margin, args.max_p99_ms,
                         args.max_lag, args.min_messages, args.failed_checks, args.then)
