"""``graymq group list|update|delete``: the consumer and producer groups the name server knows."""

from __future__ import annotations

import argparse
from typing import Any

from graymq.gray_controller.cli.common import add_nameserver_arg, print_json, run_with_nameserver, table
from graymq.protocol.errors import GrayMQError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("group", help="list, update and delete groups",
                              description="Consumer and producer groups as the name server holds them (a group is "
                              "made by its first client or rule); a group's release is operated with graymq gray.")
    sub = p.add_subparsers(dest="group_command", metavar="ACTION", required=True)
    listing = sub.add_parser("list", help="every group with its gray switch, orphan policy and live clients")
    listing.add_argument("--json", action="store_true", help="print JSON")
    delete = sub.add_parser("delete", help="delete a group without live clients, with its rules, cutover records "
                            "and retry topic; brokers drop its offsets")
    delete.add_argument("group")
    delete.add_argument("--reason", default="", help="recorded in the audit log")
    update = sub.add_parser("update", help="how the group's stock (RocketMQ 5) pop consumers consume, as "
                            "RocketMQ's subscription group says it")
    update.add_argument("group")
    update.add_argument("--fifo", choices=("on", "off"), help="one message in flight per queue, in order")
    update.add_argument("--max-attempts", type=int, metavar="N",
                        help="deliveries of a message before it goes to %%DLQ%%GROUP (1..1000; RocketMQ's default 16)")
    update.add_argument("--reason", default="", help="recorded in the audit log")
    for q in (listing, update, delete):
        add_nameserver_arg(q)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    return run_with_nameserver(args, _run)


async def _run(ns: Any, args: argparse.Namespace) -> int:
    if args.group_command == "delete":
        return await _delete(ns, args)
    if args.group_command == "update":
        return await _update(ns, args)
    groups = await ns.list_groups()
    if args.json:
        print_json([g.to_json() for g in groups])
        return 0
    rows = [[g.settings.group, "on" if g.settings.gray_switch else "off", g.settings.orphan_policy, g.live_clients,
             g.settings.created_at.strftime("%Y-%m-%d %H:%M:%S")] for g in groups]
    print(table(rows, ["group", "gray switch", "orphan policy", "live clients", "created (UTC)"]))
    return 0


async def _update(ns: Any, args: argparse.Namespace) -> int:
    if args.fifo is None and args.max_attempts is None:
        raise GrayMQError("group update: give --fifo on|off and/or --max-attempts N")
    if args.max_attempts is not None and not 1 <= args.max_attempts <= 1000:
        raise GrayMQError(f"--max-attempts {args.max_attempts} is out of range: give 1..1000")
    fifo = None if args.fifo is None else args.fifo == "on"
    settings = await ns.set_consumption(args.group, fifo, args.max_attempts, args.reason)
    print(f"group {settings.group}: fifo {'on' if settings.fifo else 'off'}, max attempts {settings.max_attempts}; "
          "brokers apply it at their stock consumers' next registration")
    return 0


async def _delete(ns: Any, args: argparse.Namespace) -> int:
    from graymq.gray_controller.cli.text import in_use_text
    from graymq.nameserver_api.client import ConflictError, NotFoundError

    try:
        await ns.delete_group(args.group, args.reason)
    except NotFoundError as exc:
        raise GrayMQError(f"group {args.group} is not known to the name server") from exc
    except ConflictError as exc:
        detail = exc.detail if isinstance(exc.detail, dict) else {}
        if "kind" in detail and "id" in detail:  # the running cutover
            raise GrayMQError(f"group {args.group} cannot be deleted while {detail['kind']} #{detail['id']} is "
                              "running: let it finish (run the same gray command again to resume it)") from exc
        raise GrayMQError(in_use_text(f"group {args.group}", exc.detail)) from exc
    print(f"group {args.group} deleted with its rules, cutover records and retry topic; "
          "brokers drop its offsets at their next registration")
    return 0
