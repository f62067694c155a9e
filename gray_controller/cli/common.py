"""Helpers shared by the CLI commands: logging, the ready line, JSON output."""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

READY_PREFIX = "graymq-ready "


def setup_logging(level: str | None = None, fmt: str = "%(asctime)s %(levelname)s %(name)s %(message)s") -> None:
    """Log to stderr at ``level``, else ``$GRAYMQ_LOG_LEVEL``, else INFO; an unknown level is a ConfigError."""
    from graymq.protocol.constants import LOG_LEVELS
    from graymq.protocol.errors import ConfigError

    name = (level or os.environ.get("GRAYMQ_LOG_LEVEL") or "INFO").upper()
    if name not in LOG_LEVELS:
        raise ConfigError(f"log level {name!r} (GRAYMQ_LOG_LEVEL): expected one of {', '.join(LOG_LEVELS)}")
    logging.basicConfig(level=name, format=fmt, stream=sys.stderr)


def print_ready(info: dict[str, Any]) -> None:
    """The one line test harnesses and scripts wait for: the server is serving at ``info['address']``."""
    print(READY_PREFIX + json.dumps(info, sort_keys=True), flush=True)


def print_json(obj: Any) -> None:
    print(json.dumps(obj, sort_keys=True, default=str), flush=True)


def add_nameserver_arg(parser: Any) -> None:
    parser.add_argument("--nameserver", default=None,
                        help="name server URL(s), comma-separated (default: $GRAYMQ_NAMESERVER)")


def parse_labels(items: list[str] | None) -> dict[str, str]:
    """``k=v`` strings into a dict; a malformed one is a ConfigError naming it."""
    from graymq.protocol.errors import ConfigError

    labels: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"label {item!r} is not k=v")
        labels[key.strip()] = value.strip()
    return labels


def table(rows: list[list[Any]], headers: list[str]) -> str:
    """A plain aligned text table."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def run_with_nameserver(args: Any, command: Callable[[Any, Any], Awaitable[int]]) -> int:
    """Run ``command(nameserver_client, args)`` on a fresh event loop; the client is closed after."""
    import asyncio

    from graymq.client.nameserver_client import NameServerClient

    async def main() -> int:
        ns = NameServerClient(args.nameserver)
        try:
            return await command(ns, args)
        finally:
            await ns.close()

    return asyncio.run(main())
