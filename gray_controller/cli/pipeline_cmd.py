"""``graymq gray promote|rollback GROUP --then GROUP2 ...``: a pipeline of groups, upstream first (see
runbooks/pipeline.py).

``--producer-group`` belongs to the group named before it: GROUP's until the first ``--then``, then that stage's.
``--lane`` applies to every stage: each promotes or rolls back that lane alone.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from graymq.gray_controller.cli.common import Interrupted, print_json, until_interrupted
from graymq.gray_controller.cli.text import format_timings


class _ThenAction(argparse.Action):
    """``--then GROUP``: a new stage, with no producer group of its own yet."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        namespace.then = [*(namespace.then or []), (values, [])]


class _ProducerGroupAction(argparse.Action):
    """``--producer-group P``: for the last stage named (``--then``), else for GROUP."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        if namespace.then:
            group, producer_groups = namespace.then[-1]
            namespace.then = [*namespace.then[:-1], (group, [*producer_groups, values])]
        else:
            namespace.producer_group = [*(namespace.producer_group or []), values]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--producer-group`` (placed: it follows the group it belongs to) and ``--then`` of promote and rollback."""
    parser.add_argument("--producer-group", action=_ProducerGroupAction, default=None, metavar="P",
                        help="producer group of the release (repeatable; default: the group itself); after --then G "
                        "it is G's")
    parser.add_argument("--then", action=_ThenAction, default=None, metavar="GROUP",
                        help="a pipeline: once GROUP is done, do the same to this downstream group (repeatable, in "
                        "pipeline order); its promote drains what the stage before wrote to its gray queues, and "
                        "--timeout applies to each stage")


async def run(ns: Any, args: argparse.Namespace) -> int:
    """Run the pipeline of ``args``; exit 0 when every stage succeeded, 1 when one failed, 128+signal interrupted."""
    from graymq.gray_controller.cli.policy_args import cutover_policy
    from graymq.protocol.operations import CutoverKind
    from graymq.runbooks.pipeline import PipelineFailed, PipelineRunner, PipelineStage

    stages = [PipelineStage(args.group, tuple(args.producer_group or ())),
              *(PipelineStage(group, tuple(producer_groups)) for group, producer_groups in args.then)]
    kind = CutoverKind(args.gray_command)
    runner = PipelineRunner(ns, stages, kind, cutover_policy(args), lane=args.lane)
    try:
        report = await until_interrupted(runner.run())
    except Interrupted as exc:
        report = runner.report
        running = report.groups_left[0] if report.groups_left else "none"
        runner.progress.note(f"pipeline {kind} interrupted at {running}: done: {_names(report.groups_done)}; not "
                             f"done: {_names(report.groups_left)}; the same command resumes it")
        return exc.exit_code
    except PipelineFailed as exc:
        report = exc.report
    if args.json:
        print_json(report.to_json())
    else:
        for number, result in enumerate(report.results, 1):
            for line in cutover_lines(result, f"stage {number}/{len(report.stages)}: "):
                print(line)
        lane = f" of lane {args.lane}" if args.lane != "gray" else ""
        print(f"pipeline {kind}{lane} {report.state}: done: {_names(report.groups_done)}; not done: "
              f"{_names(report.groups_left)}")
    return 0 if not report.groups_left else 1


def cutover_lines(result: dict[str, Any], prefix: str = "") -> list[str]:
    """A promote or rollback report (its JSON) as the lines ``graymq gray promote|rollback`` prints."""
    if "operation_id" not in result:  # a stage that ended without a cutover report (pipeline.py)
        return [f"{prefix}{result['kind']} of {result['group']} {result['state']}: {result['message']}"]
    if result.get("recorded") is False:  # nothing to do: no operation was started
        return [f"{prefix}nothing to promote: {result['group']} has no gray client and no gray rule (no operation "
                "recorded)"]
    timings = result.get("timings_s") or {}
    steps = format_timings(timings)
    lines = [f"{prefix}{result['kind']} #{result['operation_id']} of {result['group']} {result['state']} in "
             f"{sum(timings.values()):.2f} s" + (f" ({steps})" if steps else "")]
    if result.get("nothing_to_promote"):
        lines.append(f"nothing to promote: {result['group']} has no gray client and no gray rule")
    if result.get("message"):
        lines.append(result["message"])
    return lines


def _names(groups: Sequence[str]) -> str:
    return ", ".join(groups) or "none"
