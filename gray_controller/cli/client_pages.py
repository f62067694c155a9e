"""``gray status``'s client list at a fleet's size: counts for every client, the first ``--limit`` listed.

A person reads the first page and the counts per role and side; ``--all`` lists every client. ``--json`` lists
every client as it always did (scripts read it); ``--json --limit N`` lists the first N and adds
``clients_total`` and ``clients_more`` (the keys before stay, with their meaning).
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Sequence
from typing import Any

from graymq.nameserver_api.records import ClientRecord

SHOWN = 50  # clients a text status lists unless --limit or --all


def add_paging_args(parser: argparse.ArgumentParser) -> None:
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--limit", type=_positive, metavar="N",
                       help=f"list the first N clients, by role then id (default {SHOWN}; --json: every client)")
    shown.add_argument("--all", action="store_true", help="list every client")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected 1 or more, got {value}")
    return value


def shown_limit(args: argparse.Namespace) -> int | None:
    """How many clients to list (None: every one)."""
    if args.all:
        return None
    return args.limit if args.limit is not None or args.json else SHOWN


def count_line(live: Sequence[ClientRecord], stale: Sequence[ClientRecord]) -> str:
    """``clients: 5000 live (consumer: normal 3990, gray 10; producer: normal 1000), 3 stale`` — per role, the
    effective side (a lane's name)."""
    sides: Counter[tuple[str, str]] = Counter((c.role, c.in_lane or "normal") for c in live)
    roles = sorted({role for role, _ in sides})
    parts = ["; ".join(f"{role}: " + ", ".join(f"{side} {n}" for (r, side), n in sorted(sides.items()) if r == role)
                       for role in roles)]
    return f"clients: {len(live)} live" + (f" ({parts[0]})" if roles else "") + f", {len(stale)} stale"


def more_line(shown: int, total: int) -> str | None:
    """What was left out and how to see it; None when every client is listed."""
    if shown >= total:
        return None
    return f"... {total - shown} more client(s) not listed: --limit N lists the first N, --all every one"


def paged_json(doc: dict[str, Any], limit: int | None) -> dict[str, Any]:
    """``status.to_json()`` with its ``clients`` cut at ``limit`` (None: as it is, every client)."""
    if limit is None:
        return doc
    clients = doc["clients"]
    return {**doc, "clients": clients[:limit], "clients_total": len(clients),
            "clients_more": max(len(clients) - limit, 0)}
