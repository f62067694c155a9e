"""``graymq gray rollout|retire``: a weighted consumer canary run by analysis, and retiring a group's gray side."""

from __future__ import annotations

import argparse
from typing import Any

from graymq.gray_controller.cli.common import (
    Interrupted,
    NumberBound,
    add_nameserver_arg,
    add_number_arg,
    add_timeout_arg,
    print_json,
    seconds,
    until_interrupted,
)
from graymq.gray_controller.cli.lane_cmd import GRAY_LANE, add_lane_arg
from graymq.gray_controller.cli.policy_args import DEFAULT, cutover_policy, rollout_policy
from graymq.gray_controller.cli.text import format_timings
from graymq.protocol.operations import MAX_P99_MS, MAX_STEP_S, MAX_TIMEOUT_S
from graymq.runbooks.policy import ROLLOUT_THEN, RolloutPolicy

EXIT = {"PROMOTED": 0, "HELD": 0, "ROLLED_BACK": 1, "FAILED": 1}


def register(sub: Any) -> None:
    rollout = sub.add_parser(
        "rollout", help="shift the group's weight in steps, check the gray side's health at each, then promote "
        "(or hold); roll back by itself on a failed check",
        description="Sets each weight of --steps in turn; after --step-seconds compares what the gray side (v2) "
        "did meanwhile with the thresholds: failure rate above max(--max-failure-rate, the normal side's rate + "
        "--failure-margin), p99 consume latency above --max-p99-ms, gray lag above --max-lag. A check with fewer "
        "than --min-messages gray deliveries waits (up to --timeout). --failed-checks failed checks in a row roll "
        "back: weight 0, the gray consumers retire (hand back every queue, consume nothing; safe to stop) and the "
        "normal consumers adopt the gray queues and what v2 failed — nothing lost. Exit 0 promoted or held, 1 "
        "rolled back or failed. While a broker does not answer, the current weight is held (no check, no "
        "failure; --timeout still bounds it). Interrupted, it stays RUNNING in the name server: the same command "
        "resumes it.")
    rollout.add_argument("group")
    rollout.add_argument("--steps", required=True, type=_weights, help="weights in percent, e.g. 5,25,50")
    add_number_arg(rollout, "--step-seconds", seconds("--step-seconds", MAX_STEP_S, above_zero=True), required=True,
                   metavar="S", help="time at each weight (at most a day)")
    add_number_arg(rollout, "--max-failure-rate", NumberBound("--max-failure-rate", 0, 100),
                   default=RolloutPolicy.max_failure_rate, metavar="PCT",
                   help=f"highest tolerated gray failure rate (default: {RolloutPolicy.max_failure_rate:g})")
    add_number_arg(rollout, "--failure-margin", NumberBound("--failure-margin", 0, 100),
                   default=RolloutPolicy.failure_margin, metavar="PCT", help="points above the normal side's failure "
                   f"rate still tolerated (default: {RolloutPolicy.failure_margin:g})")
    add_number_arg(rollout, "--max-p99-ms", NumberBound("--max-p99-ms", 0, MAX_P99_MS, above_low=True),
                   default=RolloutPolicy.max_p99_ms, metavar="MS", help="highest gray p99 latency")
    rollout.add_argument("--max-lag", type=int, default=RolloutPolicy.max_lag, metavar="N",
                         help="highest gray lag (messages)")
    rollout.add_argument("--min-messages", type=int, default=RolloutPolicy.min_messages, metavar="N",
                         help=f"gray deliveries a check needs (default: {RolloutPolicy.min_messages})")
    rollout.add_argument("--failed-checks", type=int, default=RolloutPolicy.failed_checks, metavar="K",
                         help=f"failed checks in a row that roll back (default: {RolloutPolicy.failed_checks})")
    rollout.add_argument("--then", choices=ROLLOUT_THEN, default=RolloutPolicy.then,
                         help=f"after the last step passes: promote or hold the last weight (default: "
                         f"{RolloutPolicy.then})")
    rollout.add_argument("--producer-group", action="append", default=None,
                         help="producer group of the release (repeatable; default: the group itself)")
    add_timeout_arg(rollout, default=DEFAULT.timeout_s, help="longest wait for a check's messages, and for the "
                    f"promote or rollback (default: {DEFAULT.timeout_s:g})")
    add_number_arg(rollout, "--wait-for-gray", seconds("--wait-for-gray", MAX_TIMEOUT_S),
                   default=DEFAULT.wait_for_gray_s, metavar="S", help="at start, how long to wait for a gray "
                   f"consumer to register (default: {DEFAULT.wait_for_gray_s:g})")
    rollout.add_argument("--json", action="store_true", help="print the report as JSON")
    add_lane_arg(rollout, "roll out lane NAME alone: its weight, its consumers judged against the base ones, "
                 "then it alone promoted or rolled back (drained); other lanes run on untouched (default gray)")

    retire = sub.add_parser(
        "retire", help="retire the group's gray side (its consumers hand back every queue and consume nothing) "
        "or, with --off, bring it back",
        description="A retired gray side holds no queue while its processes run on; set the orphan policy to "
        "adopt so the normal consumers take the gray queues. A rollout's rollback retires it; the next rollout "
        "brings it back.")
    retire.add_argument("group")
    retire.add_argument("--off", action="store_true", help="bring the gray side back")
    retire.add_argument("--reason", default="", help="recorded in the audit log")
    for q in (rollout, retire):
        add_nameserver_arg(q)


def _weights(text: str) -> list[int]:
    """``5,25,50`` as weights; argparse prints the error of anything else in one line.

    >>> _weights("5, 25,50")
    [5, 25, 50]
    """
    try:
        weights = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--steps takes whole percents separated by commas, got {text!r}") from None
    if any(not 1 <= w <= 100 for w in weights):
        raise argparse.ArgumentTypeError(f"--steps weights must be from 1 to 100, got {text!r}")
    return weights


async def run(ns: Any, args: argparse.Namespace) -> int:
    if args.gray_command == "retire":
        await ns.set_retired(args.group, not args.off, args.reason)
        print(f"gray side of {args.group}: " + ("consuming again" if args.off else
              "retired (its consumers hand back every queue; set the orphan policy to adopt so normal consumers "
              "take the gray queues)"))
        return 0
    return await _rollout(ns, args)


async def _rollout(ns: Any, args: argparse.Namespace) -> int:
    from graymq.runbooks.cutover import CutoverFailed
    from graymq.runbooks.rollout import RolloutRunner

    lane = args.lane or GRAY_LANE
    runner = RolloutRunner(ns, args.group, rollout_policy(args), cutover_policy(args), lane=lane)
    try:
        report = (await until_interrupted(runner.rollout())).to_json()
    except Interrupted as exc:
        runner.progress.note(f"rollout of {args.group} interrupted; it stays RUNNING: run the command again "
                             "to resume it")
        return exc.exit_code
    except CutoverFailed as exc:
        report = exc.report
    finally:
        await runner.close()
    if args.json:
        print_json(report)
    else:
        steps = format_timings(report.get("timings_s") or {})
        of_lane = "" if lane == GRAY_LANE else f" (lane {lane})"
        print(f"rollout #{report['operation_id']} of {report['group']}{of_lane}: {report['outcome']} after "
              f"{len(report.get('checks') or [])} check(s)" + (f" ({steps})" if steps else "")
              + (f" — {report['message']}" if report.get("message") else ""))
    return EXIT.get(report["outcome"], 1)
