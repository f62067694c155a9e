"""``graymq audit``: who changed what in the name server, when, from which value to which, and why."""

from __future__ import annotations

import argparse
import json
from typing import Any

from graymq.gray_controller.cli.common import add_nameserver_arg, print_json, run_with_nameserver, table
from graymq.protocol.errors import ConfigError

CHANGE_WIDTH = 70
MAX_LIMIT = 1000


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("audit", help="the name server's audit log, newest first",
                              description="Who changed what in the name server (topics, groups, flags, rules, "
                              "operations, principals), when, from which value to which, and why; newest first.")
    p.add_argument("--group", default=None, help="only the entries of this group")
    p.add_argument("--limit", type=int, default=20, help=f"at most N entries (1 to {MAX_LIMIT}; default: 20)")
    p.add_argument("--json", action="store_true", help="print JSON (whole before/after values)")
    add_nameserver_arg(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    return run_with_nameserver(args, _run)


async def _run(ns: Any, args: argparse.Namespace) -> int:
    if not 1 <= args.limit <= MAX_LIMIT:
        raise ConfigError(f"--limit must be 1 to {MAX_LIMIT}")
    entries = await ns.list_audit(args.group, args.limit)
    if args.json:
        print_json([e.to_json() for e in entries])
        return 0
    rows = [[e.id, e.at.strftime("%Y-%m-%d %H:%M:%S"), e.actor, f"{e.object_type} {e.object_id}", e.action,
             change_text(e.before, e.after), e.reason or ""] for e in entries]
    print(table(rows, ["id", "at (UTC)", "actor", "object", "action", "change", "reason"]))
    return 0


def change_text(before: Any, after: Any, width: int = CHANGE_WIDTH) -> str:
    """``before -> after`` in compact JSON, cut at about ``width`` characters.

    >>> change_text({"gray_switch": True}, {"gray_switch": False})
    '{"gray_switch":true} -> {"gray_switch":false}'
    >>> change_text(None, {"queue_nums": 6})
    '-> {"queue_nums":6}'
    """
    parts = [] if before is None else [_compact(before)]
    parts += ["->"] + ([] if after is None else [_compact(after)])
    text = " ".join(parts) if before is not None or after is not None else ""
    return text if len(text) <= width else text[: width - 1] + "…"


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)
