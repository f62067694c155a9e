"""``graymq gray status|switch|flag|rule|weight|promote|rollback|rollout|retire``: operate a gray release."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from graymq.core.queue_layout import GRAY_LANE
from graymq.gray_controller.cli import lane_cmd, pipeline_cmd, rollout_cmd
from graymq.gray_controller.cli.client_pages import add_paging_args, count_line, more_line, paged_json, shown_limit
from graymq.gray_controller.cli.common import (
    Interrupted,
    add_nameserver_arg,
    add_timeout_arg,
    add_wait_args,
    lane_name,
    parse_labels,
    print_json,
    run_with_nameserver,
    table,
    until_interrupted,
)
from graymq.gray_controller.cli.members_wait import DEFAULT_MEMBERS_WAIT_S, members_hold_queues
from graymq.gray_controller.cli.policy_args import DEFAULT, cutover_policy
from graymq.gray_controller.cli.text import format_labels, format_queues, format_side, format_timings
from graymq.protocol.errors import ConfigError
from graymq.protocol.operations import CutoverKind, CutoverState

if TYPE_CHECKING:
    from graymq.nameserver_api.records import CutoverRecord


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "gray", help="gray release: status, switch, flag, rule, promote, rollback, orphan, history, weight, rollout, "
        "retire", description="Operate a group's gray release: see it (status, history), say who is gray (switch, "
        "flag, rule), give the gray side normal traffic (weight, rollout) and end it (promote, rollback, retire).")
    sub = p.add_subparsers(dest="gray_command", metavar="ACTION", required=True, parser_class=IntermixedParser)

    status = _register_status(sub)

    switch = sub.add_parser("switch", help="turn gray routing of a group on or off")
    switch.add_argument("group")
    switch.add_argument("value", choices=["on", "off"])
    switch.add_argument("--reason", default="")

    flag = sub.add_parser("flag", help="set a client's gray flag (off on a gray client: it drains, then flips)")
    flag.add_argument("group")
    flag.add_argument("client_id")
    flag.add_argument("value", choices=["on", "off", "auto"], help="auto: follow the group's rules")
    flag.add_argument("--reason", default="")
    lane_cmd.add_lane_arg(flag, "on: put the client in lane NAME (default gray); off: take it out of lane NAME "
                          "(it drains first)")

    rule = sub.add_parser("rule", help="add (on), remove (off) or list gray rules: clients with these labels are "
                          "gray (or in --lane NAME)")
    rule.add_argument("group", nargs="?", help="the group (or --all-groups)")
    rule.add_argument("--label", action="append",
                      help="k=v (repeatable: all must match); v may be a glob: host=orders-v2-* matches every "
                           "host starting orders-v2- (* any run, ? one character, [..] a set; quote it in a shell)")
    rule.add_argument("value", choices=["on", "off", "list"])
    rule.add_argument("--all-groups", action="store_true",
                      help="a rule of every group, after each group's own rules (a pod's producers and consumers)")
    lane_cmd.add_lane_arg(rule, "matching clients are in lane NAME (default gray)")
    rule.add_argument("--json", action="store_true", help="list: print JSON")

    for name, help_text in (("promote", "make the gray release normal, draining the gray queues first"),
                            ("rollback", "stop the gray release without losing its messages")):
        q = sub.add_parser(name, help=help_text, description=f"{help_text[0].upper()}{help_text[1:]}. Interrupted "
                           "(Ctrl-C), it stays RUNNING in the name server: the same command resumes it. With --then, "
                           "a pipeline: each group in turn, upstream first; a failed stage stops it.")
        q.add_argument("group")
        pipeline_cmd.add_arguments(q)
        add_timeout_arg(q, default=DEFAULT.timeout_s, help=f"give up after S seconds (default: {DEFAULT.timeout_s:g})")
        q.add_argument("--json", action="store_true", help="print the report as JSON")
        q.add_argument("--lane", type=lane_name, default=GRAY_LANE, metavar="NAME",
                       help="the lane to end, in every stage with --then (default: gray); other lanes run on")
        if name == "rollback":
            mode = q.add_mutually_exclusive_group()
            mode.add_argument("--drain", dest="mode", action="store_const", const="drain",
                              help="gray consumers finish the gray backlog" + _default_mode("drain"))
            mode.add_argument("--adopt", dest="mode", action="store_const", const="adopt",
                              help="normal consumers take over the gray queues once gray consumers stop"
                              + _default_mode("adopt"))
            q.set_defaults(mode=DEFAULT.mode.value)
    _register_orphan_and_history(sub)
    _register_weight(sub)
    rollout_cmd.register(sub)
    for q in (status, switch, flag, rule, *[sub.choices["promote"], sub.choices["rollback"]]):
        add_nameserver_arg(q)
    p.set_defaults(handler=run)


def _register_status(sub: Any) -> Any:
    status = sub.add_parser("status", help="clients, flags, states, queues, weight and gray backlog of a group",
                            description="A group's clients (desired and effective side, state, queues), its gray "
                            "switch, orphan policy and weight, each side's health and lag, and the gray backlog per "
                            "queue. A broker that does not answer is a WARNING line; its figures are unknown.")
    status.add_argument("group")
    status.add_argument("--json", action="store_true", help="print JSON (every queue listed)")
    add_paging_args(status)
    add_wait_args(status, "--wait-for", "N consumers or Spark jobs of the group hold queues (a script's wait for "
                  "the members it started)", DEFAULT_MEMBERS_WAIT_S)
    return status


class IntermixedParser(argparse.ArgumentParser):
    """A gray action's parser reading its positionals apart from its options, wherever they sit: ``gray rule GROUP
    --label k=v on`` and ``gray rule --all-groups --label k=v on`` (an optional GROUP before a required value,
    which argparse alone reads only when the positionals are side by side)."""

    _reading_positionals = False

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        if self._reading_positionals:  # the intermixed parse's own passes
            return super().parse_known_args(args, namespace)
        self._reading_positionals = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._reading_positionals = False


def run(args: argparse.Namespace) -> int:
    if args.gray_command == "weight":
        args.percent = parse_percent(args.percent)  # refused before any request
    if args.gray_command == "rule":
        lane_cmd.check_rule_target(args)
    return run_with_nameserver(args, _run)


async def _run(ns: Any, args: argparse.Namespace) -> int:
    action = args.gray_command
    if action in ("orphan", "history"):
        return await (_orphan if action == "orphan" else _history)(ns, args)
    if action == "weight":
        return await _weight(ns, args)
    if action in ("rollout", "retire"):
        return await rollout_cmd.run(ns, args)
    if action == "status":
        return await _status(ns, args)
    if action == "switch":
        await ns.set_switch(args.group, args.value == "on", args.reason)
        print(f"gray switch of {args.group}: {args.value}")
    elif action == "flag" and args.lane is not None:
        return await lane_cmd.flag(ns, args)
    elif action == "flag":
        value = {"on": True, "off": False, "auto": None}[args.value]
        result = await ns.set_flag(args.group, args.client_id, value, args.reason)
        desired = ", ".join(sorted({_flag(c.desired_gray) for c in result.clients})) or "unknown"
        print(f"{args.group}/{args.client_id}: explicit flag {args.value}; desired now {desired}"
              + (" (a gray client drains its gray queues before flipping)" if value is False else ""))
    elif action == "rule":
        return await _rule(ns, args)
    else:
        return await _cutover(ns, args)
    return 0


def _print_clients(status: Any, limit: int | None) -> None:
    """The counts of every client, then the first ``limit`` live ones (None: all) and as many stale ones."""
    print(count_line(status.clients, status.stale))
    shown = status.clients[:limit]
    rows = [[c.client_id, c.role, format_labels(c.labels), c.wanted_lane or "normal", c.in_lane or "normal", c.state,
             format_queues(c.queues)] for c in shown]  # a lane's name: gray as before, or another lane
    print(table(rows, ["client", "role", "labels", "desired", "effective", "state", "queues"]))
    stale = status.stale[:limit]
    if stale:
        print("stale (no heartbeat; promote and rollback wait for stale gray producers, not consumers): "
              + ", ".join(f"{c.client_id} ({c.role}, {_flag(c.gray)})" for c in stale))
    more = more_line(len(shown) + len(stale), len(status.clients) + len(status.stale))
    if more is not None:
        print(more)


async def _status(ns: Any, args: argparse.Namespace) -> int:
    from graymq.runbooks.group_state import GroupInspector

    if args.wait_for is not None:
        await members_hold_queues(ns, args.group, args.wait_for, args.wait_timeout)
    await _require_group(ns, args.group)
    inspector = GroupInspector(ns)
    try:
        status = await inspector.status(args.group, with_weighted=True, with_lag=True, partial=True,
                                        gray_lane_only=True)
        status.lanes = await inspector.lane_statuses(status)
    finally:
        await inspector.close()
    for broker in status.unavailable:  # on stderr: the JSON on stdout stays one document
        print(f"WARNING: broker {broker.broker_name} ({broker.address}) did not answer ({broker.error}): the "
              "figures of its queues are unknown, the rest is shown", file=sys.stderr)
    limit = shown_limit(args)
    if args.json:
        print_json(paged_json(status.to_json(), limit))
        return 0
    print(f"group {status.group}: gray switch {'on' if status.gray_switch else 'off'}, "
          f"orphan policy {status.orphan_policy}, weight {status.gray_weight}%"
          + (", gray side RETIRED (its consumers hold nothing)" if status.gray_retired else ""))
    _print_clients(status, limit)
    if status.gray_weight or status.weighted:
        held = format_queues((str(w.queue) for w in status.weighted), width=120) or "none"
        print(f"normal queues held by the gray side: {held}")
    health = status.health()
    for side in ("gray", "normal"):
        lag = (status.lag or {}).get(side, 0)
        print(f"{side} side: {format_side(health[side])}, lag {'unknown' if lag is None else lag}")
    for rs in status.broker_sets:
        followers = ", ".join(f"{r.replica_id} ({'in sync' if r.in_sync else 'not in sync'}, "
                              f"lag {r.lag_bytes} B{'' if r.live else ', silent'})"
                              for r in rs.replicas if not r.leader) or "none"
        print(f"broker set {rs.broker_name} ({rs.replication}): leader replica {rs.leader_replica_id} "
              f"at epoch {rs.epoch}, followers {followers}")
    if status.unknown_gray:
        silent = ", ".join(b.broker_name for b in status.unavailable)
        print(f"gray backlog: unknown ({status.gray_backlog} on the brokers that answered; unknown on "
              f"{silent}: {format_queues(map(str, status.unknown_gray))})")
    else:
        print(f"gray backlog: {status.gray_backlog}")
    if status.queues:
        print(table([[q.broker_name, q.topic, q.queue_id, q.consumer_offset, q.max_offset, q.backlog]
                     for q in status.queues], ["broker", "topic", "queue", "committed", "max", "backlog"]))
    lane_cmd.print_lanes(status.lanes or [])
    return 0


def _flag(value: bool) -> str:
    return "gray" if value else "normal"


async def _rule(ns: Any, args: argparse.Namespace) -> int:
    if args.lane is not None or args.all_groups or args.value == "list":
        return await lane_cmd.rule(ns, args)
    if not args.label:
        raise ConfigError(f"rule {args.value} needs --label k=v")
    selector = parse_labels(args.label)
    if args.value == "on":
        rule = await ns.add_rule(args.group, selector, True)
        print(f"rule #{rule.id} of {args.group}: clients with {format_labels(selector)} are gray")
        return 0
    removed = [r for r in await ns.list_rules(args.group) if r.selector == selector]
    if not removed:
        raise ConfigError(f"no rule of {args.group} has exactly the selector {format_labels(selector)}")
    for r in removed:
        await ns.delete_rule(args.group, r.id)
    print(f"removed {len(removed)} rule(s) of {args.group} with selector {format_labels(selector)}")
    return 0


async def _cutover(ns: Any, args: argparse.Namespace) -> int:
    from graymq.runbooks.cutover import CutoverFailed, CutoverRunner

    if args.then:
        return await pipeline_cmd.run(ns, args)
    await _require_group(ns, args.group)
    runner = CutoverRunner(ns, args.group, cutover_policy(args), lane=args.lane)
    try:
        report = await until_interrupted(runner.promote(record_nothing=False) if args.gray_command == "promote"
                                           else runner.rollback())
    except Interrupted as exc:
        runner.progress.note(await _interrupted_text(ns, args))
        return exc.exit_code
    except CutoverFailed as exc:
        if args.json:
            print_json(exc.report)
        else:
            print(f"{args.gray_command} of {args.group} FAILED: {exc.message}")
        return 1
    finally:
        await runner.close()
    result = {**report.to_json(), **({"nothing_to_promote": report.changed_nothing()}
                                     if args.gray_command == "promote" else {})}
    if args.json:
        print_json(result)
    else:
        print("\n".join(pipeline_cmd.cutover_lines(result)))
    return 0


async def _interrupted_text(ns: Any, args: argparse.Namespace) -> str:
    """What an interrupted promote or rollback left behind: its operation stays RUNNING in the name server."""
    from graymq.nameserver_api.client import NotFoundError
    from graymq.protocol.errors import GrayMQError

    try:
        running = await ns.list_cutovers(args.group, state="RUNNING")
    except NotFoundError:
        running = []
    except GrayMQError as exc:
        return (f"{args.gray_command} of {args.group} interrupted; it may still be running ({exc.message}): "
                "run the command again to resume")
    if not running:
        return f"{args.gray_command} of {args.group} interrupted before it started; nothing is running"
    op = running[0]
    return f"{op.kind} #{op.id} of {args.group} is still running; run the command again to resume"


def _default_mode(mode: str) -> str:
    return " (default)" if mode == DEFAULT.mode else ""


def _register_orphan_and_history(sub: Any) -> None:
    orphan = sub.add_parser("orphan", help="what happens to gray queues when the group has no gray consumer",
                            description="hold: gray queues wait for a gray consumer; adopt: normal consumers take "
                            "them (and their backlog) while no gray consumer is left.")
    orphan.add_argument("group")
    orphan.add_argument("policy", choices=["hold", "adopt"])
    orphan.add_argument("--reason", default="", help="recorded in the audit log")
    lane_cmd.add_lane_arg(orphan, "the policy for lane NAME's queues in this group (default gray: the group's "
                          "orphan policy; another lane: its override, default hold in a group taking part in "
                          "the lane, adopt in another)")
    history = sub.add_parser("history", help="past promote, rollback and rollout operations of a group, newest first")
    history.add_argument("group")
    history.add_argument("--json", action="store_true", help="print JSON (whole recorded results)")
    lane_cmd.add_lane_arg(history, "only the operations of lane NAME (gray: today's gray side)")
    for q in (orphan, history):
        add_nameserver_arg(q)


def _register_weight(sub: Any) -> None:
    weight = sub.add_parser(
        "weight", help="give the gray consumers PERCENT of each topic's normal queues (0: gray queues only)",
        description="Besides the gray queues, the group's gray consumers take round(PERCENT % of the normal "
        "queues) of each subscribed topic on every broker, always the same ones, from the normal consumers "
        "(queue by queue, so order holds); producers and other groups are untouched. No effect while the group "
        "has no gray consumer or its gray switch is off. 0 gives the queues back. With --lane, the consumers of "
        "that lane take the share instead; the lanes' shares are disjoint (gray first, then the other lanes by "
        "name) and the group's weights add up to at most 100 (docs/lanes.md).")
    weight.add_argument("group")
    weight.add_argument("percent", metavar="PERCENT", help="a whole number from 0 to 100")
    weight.add_argument("--reason", default="", help="recorded in the audit log")
    weight.add_argument("--json", action="store_true", help="print the group's settings as JSON (with --lane: "
                        "the lane as gray status lists it)")
    lane_cmd.add_lane_arg(weight, "the weight of lane NAME in this group (default gray: the group's weight)")
    add_nameserver_arg(weight)


def parse_percent(text: str) -> int:
    """PERCENT of ``gray weight`` (``50`` or ``50%``); anything else is a ConfigError.

    >>> parse_percent("50"), parse_percent("0"), parse_percent("100%")
    (50, 0, 100)
    """
    digits = text.strip().removesuffix("%")
    if not (digits.isascii() and digits.isdigit()) or not 0 <= int(digits) <= 100:
        raise ConfigError(f"PERCENT must be a whole number from 0 to 100, got {text!r}")
    return int(digits)


async def _weight(ns: Any, args: argparse.Namespace) -> int:
    if args.lane not in (None, lane_cmd.GRAY_LANE):
        return await lane_cmd.weight(ns, args)
    view = await ns.set_weight(args.group, args.percent, args.reason)
    if args.json:
        print_json(view.to_json())
        return 0
    what = (f"its gray consumers also take {args.percent}% of each subscribed topic's normal queues" if args.percent
            else "its gray consumers take the gray queues only")
    off = "" if view.gray_switch else " (the gray switch is off: no effect until it is on)"
    print(f"weight of {args.group}: {args.percent}% ({what}){off}")
    return 0


async def _require_group(ns: Any, group: str) -> None:
    """Refuse, in one line, a group the name server does not know (reads never create one)."""
    from graymq.nameserver_api.client import NotFoundError
    from graymq.protocol.errors import GrayMQError

    try:
        await ns.get_group(group)
    except NotFoundError as exc:
        raise GrayMQError(f"group {group} is not known to the name server") from exc


async def _orphan(ns: Any, args: argparse.Namespace) -> int:
    if args.lane not in (None, lane_cmd.GRAY_LANE):
        return await lane_cmd.orphan(ns, args)
    await ns.set_orphan_policy(args.group, args.policy, args.reason)
    what = ("normal consumers take the gray queues while no gray consumer is left" if args.policy == "adopt"
            else "gray queues wait for a gray consumer")
    print(f"orphan policy of {args.group}: {args.policy} ({what})")
    return 0


async def _history(ns: Any, args: argparse.Namespace) -> int:
    from graymq.nameserver_api.client import NotFoundError
    from graymq.protocol.errors import GrayMQError

    try:
        operations = await ns.list_cutovers(args.group)
    except NotFoundError as exc:
        raise GrayMQError(f"group {args.group} is not known to the name server") from exc
    if args.lane is not None:
        operations = [op for op in operations if op.lane == args.lane]
    if args.json:
        print_json([op.to_json() for op in operations])
        return 0
    if not operations:
        print(f"no promote, rollback or rollout of {args.group}"
              + (f" (lane {args.lane})" if args.lane is not None else "") + " recorded")
        return 0
    rows = [[op.id, op.kind if op.lane == GRAY_LANE else f"{op.kind} of lane {op.lane}", op.mode, op.state,
             op.started_at.strftime("%Y-%m-%d %H:%M:%S"),
             _took(op), format_timings((op.result or {}).get("timings_s") or {}), _outcome(op)]
            for op in operations]
    print(table(rows, ["id", "kind", "mode", "state", "started (UTC)", "took", "steps", "outcome"]))
    return 0


def _took(operation: CutoverRecord) -> str:
    if operation.finished_at is None:
        return "running"
    return f"{(operation.finished_at - operation.started_at).total_seconds():.2f} s"


def _outcome(operation: CutoverRecord) -> str:
    """What a recorded operation achieved or where it stopped, from its result."""
    result = operation.result or {}
    if operation.kind == CutoverKind.ROLLOUT and operation.state.finished:
        return f"{result.get('outcome', operation.state)}" + (f": {result['message']}" if result.get("message")
                                                               else "")
    if operation.state == CutoverState.RUNNING:
        return f"at step {operation.step or 'start'}"
    if operation.state != CutoverState.SUCCEEDED:
        return result.get("message") or f"stopped at step {operation.step or 'start'}"
    flipped = (f"{len(result.get('producers_flipped') or [])} producer(s), "
               f"{len(result.get('consumers_flipped') or [])} consumer(s) flipped")
    backlog = result.get("gray_backlog")
    return flipped + (f", gray backlog {backlog}" if backlog is not None else "") + (
        f"; {result['message']}" if result.get("message") else "")
