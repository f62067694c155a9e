"""``graymq gray status|switch|flag|rule|promote|rollback``: operate a gray release."""

from __future__ import annotations

import argparse
from typing import Any

from graymq.gray_controller.cli.common import (
    Interrupted,
    add_nameserver_arg,
    parse_labels,
    print_json,
    run_with_nameserver,
    table,
    until_interrupted,
)
from graymq.gray_controller.cli.text import format_labels, format_queues, format_timings
from graymq.protocol.errors import ConfigError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("gray", help="gray release: status, switch, flags, rules, promote, rollback")
    sub = p.add_subparsers(dest="gray_command", metavar="ACTION", required=True)

    status = sub.add_parser("status", help="clients, flags, states, queues and gray backlog of a group")
    status.add_argument("group")
    status.add_argument("--json", action="store_true", help="print JSON (every queue listed)")

    switch = sub.add_parser("switch", help="turn gray routing of a group on or off")
    switch.add_argument("group")
    switch.add_argument("value", choices=["on", "off"])
    switch.add_argument("--reason", default="")

    flag = sub.add_parser("flag", help="set a client's gray flag (off on a gray client: it drains, then flips)")
    flag.add_argument("group")
    flag.add_argument("client_id")
    flag.add_argument("value", choices=["on", "off", "auto"], help="auto: follow the group's rules")
    flag.add_argument("--reason", default="")

    rule = sub.add_parser("rule", help="add (on) or remove (off) a gray rule: clients with these labels are gray")
    rule.add_argument("group")
    rule.add_argument("--label", action="append", required=True, help="k=v (repeatable: all must match)")
    rule.add_argument("value", choices=["on", "off"])

    for name, help_text in (("promote", "make the gray release normal, draining the gray queues first"),
                            ("rollback", "stop the gray release without losing its messages")):
        q = sub.add_parser(name, help=help_text, description=f"{help_text[0].upper()}{help_text[1:]}. Interrupted "
                           "(Ctrl-C), it stays RUNNING in the name server: the same command resumes it.")
        q.add_argument("group")
        q.add_argument("--producer-group", action="append", default=None,
                       help="producer group of the release (repeatable; default: the group itself)")
        q.add_argument("--timeout", type=float, default=300.0, help="give up after S seconds (default: 300)")
        q.add_argument("--json", action="store_true", help="print the report as JSON")
        if name == "rollback":
            mode = q.add_mutually_exclusive_group()
            mode.add_argument("--drain", dest="mode", action="store_const", const="drain",
                              help="gray consumers finish the gray backlog (default)")
            mode.add_argument("--adopt", dest="mode", action="store_const", const="adopt",
                              help="normal consumers take over the gray queues once gray consumers stop")
            q.set_defaults(mode="drain")
    for q in (status, switch, flag, rule, *[sub.choices["promote"], sub.choices["rollback"]]):
        add_nameserver_arg(q)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    return run_with_nameserver(args, _run)


async def _run(ns: Any, args: argparse.Namespace) -> int:
    action = args.gray_command
    if action == "status":
        return await _status(ns, args)
    if action == "switch":
        await ns.set_switch(args.group, args.value == "on", args.reason)
        print(f"gray switch of {args.group}: {args.value}")
    elif action == "flag":
        value = {"on": True, "off": False, "auto": None}[args.value]
        result = await ns.set_flag(args.group, args.client_id, value, args.reason)
        desired = ", ".join(sorted({_flag(c["desired_gray"]) for c in result["clients"]})) or "unknown"
        print(f"{args.group}/{args.client_id}: explicit flag {args.value}; desired now {desired}"
              + (" (a gray client drains its gray queues before flipping)" if value is False else ""))
    elif action == "rule":
        return await _rule(ns, args)
    else:
        return await _cutover(ns, args)
    return 0


async def _status(ns: Any, args: argparse.Namespace) -> int:
    from graymq.gray_controller.group_state import GroupInspector

    inspector = GroupInspector(ns)
    try:
        status = await inspector.status(args.group)
    finally:
        await inspector.close()
    if args.json:
        print_json(status.to_json())
        return 0
    print(f"group {status.group}: gray switch {'on' if status.gray_switch else 'off'}, "
          f"orphan policy {status.orphan_policy}")
    rows = [[c["client_id"], c["role"], format_labels(c["labels"]), _flag(c["desired_gray"]), _flag(c["gray"]),
             c["state"], format_queues(c["queues"])] for c in status.clients]
    print(table(rows, ["client", "role", "labels", "desired", "effective", "state", "queues"]))
    if status.stale:
        print("stale (no heartbeat, presumed gone; promote and rollback do not wait for them): "
              + ", ".join(f"{c['client_id']} ({c['role']}, {_flag(c['gray'])})" for c in status.stale))
    print(f"gray backlog: {status.gray_backlog}")
    if status.queues:
        print(table([[q.broker_name, q.topic, q.queue_id, q.consumer_offset, q.max_offset, q.backlog]
                     for q in status.queues], ["broker", "topic", "queue", "committed", "max", "backlog"]))
    return 0


def _flag(value: bool) -> str:
    return "gray" if value else "normal"


async def _rule(ns: Any, args: argparse.Namespace) -> int:
    selector = parse_labels(args.label)
    if args.value == "on":
        rule = await ns.add_rule(args.group, selector, True)
        print(f"rule #{rule['id']} of {args.group}: clients with {format_labels(selector)} are gray")
        return 0
    removed = [r for r in await ns.list_rules(args.group) if r["selector"] == selector]
    if not removed:
        raise ConfigError(f"no rule of {args.group} has exactly the selector {format_labels(selector)}")
    for r in removed:
        await ns.delete_rule(args.group, r["id"])
    print(f"removed {len(removed)} rule(s) of {args.group} with selector {format_labels(selector)}")
    return 0


async def _cutover(ns: Any, args: argparse.Namespace) -> int:
    from graymq.gray_controller.cutover import CutoverFailed, CutoverRunner

    if args.timeout <= 0:
        raise ConfigError("--timeout must be > 0")
    runner = CutoverRunner(ns, args.group, args.producer_group, args.timeout)
    try:
        report = await until_interrupted(
            runner.promote() if args.gray_command == "promote" else runner.rollback(args.mode))
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
    if args.json:
        print_json(report.to_json())
    else:
        steps = format_timings(report.timings_s)
        print(f"{report.kind} #{report.operation_id} of {report.group} {report.state} in "
              f"{sum(report.timings_s.values()):.2f} s" + (f" ({steps})" if steps else ""))
        if report.message:
            print(report.message)
    return 0


async def _interrupted_text(ns: Any, args: argparse.Namespace) -> str:
    """What an interrupted promote or rollback left behind: its operation stays RUNNING in the name server."""
    from graymq.client.nameserver_client import NotFoundError
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
    return f"{op['kind']} #{op['id']} of {args.group} is still running; run the command again to resume"
