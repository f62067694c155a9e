"""Helpers shared by the CLI commands: logging, the ready line, JSON output, argument checks, help texts."""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from graymq.protocol.operations import MAX_TIMEOUT_S

if TYPE_CHECKING:
    from graymq.nameserver_api.client import NameServerClient

T = TypeVar("T")

READY_PREFIX = "graymq-ready "

# Libraries log at this level or above unless GRAYMQ_LOG_LEVEL=DEBUG (httpx alone logs every heartbeat at INFO).
LIBRARY_LOG_LEVEL = logging.WARNING

NAMESERVER_ENV_HELP = """environment:
  GRAYMQ_NAMESERVER    name server URL(s), comma-separated, when --nameserver is not given
  GRAYMQ_ADMIN_TOKEN   bearer token of admin calls (unset: none, enough in dev mode)
  GRAYMQ_TOKEN         bearer token of client calls: produce, consume (a principal's, see graymq principal)
  GRAYMQ_NAMESERVER_WAIT_S  seconds to wait for a name server (and, to send or consume, a broker) still
                       coming up, saying so (default: 60; 0: fail at once)
  GRAYMQ_LOG_LEVEL     DEBUG, INFO, WARNING, ERROR or CRITICAL (default: INFO for servers, WARNING for
                       other commands); DEBUG also shows the logs of libraries (httpx, uvicorn...)"""
SERVER_LOG_HELP = ("  GRAYMQ_LOG_LEVEL     DEBUG, INFO (default), WARNING, ERROR or CRITICAL; "
                   "DEBUG also shows library logs")


class HelpFormatter(argparse.HelpFormatter):
    """Wraps a one-line paragraph of a description or epilog; keeps the line breaks of a paragraph that has
    them (the environment tables)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n\n".join(
            "\n".join(indent + line for line in paragraph.splitlines()) if "\n" in paragraph
            else super(HelpFormatter, self)._fill_text(paragraph, width, indent)
            for paragraph in text.split("\n\n"))


def setup_logging(level: str | None = None, fmt: str = "%(asctime)s %(levelname)s %(name)s %(message)s",
                  loud: tuple[str, ...] = (), default: str = "INFO") -> None:
    """Log to stderr: graymq's own loggers (and the ``loud`` ones) at ``level``, else ``$GRAYMQ_LOG_LEVEL``, else
    ``default``; every other library (httpx, httpcore, asyncio, uvicorn.access, ...) at WARNING or above, unless
    the level is DEBUG. An unknown level is a ConfigError."""
    from graymq.protocol.constants import LOG_LEVELS
    from graymq.protocol.errors import ConfigError

    name = (level or os.environ.get("GRAYMQ_LOG_LEVEL") or default).upper()
    if name not in LOG_LEVELS:
        raise ConfigError(f"log level {name!r} (GRAYMQ_LOG_LEVEL): expected one of {', '.join(LOG_LEVELS)}")
    chosen = logging.getLevelNamesMapping()[name]
    libraries = chosen if chosen == logging.DEBUG else max(chosen, LIBRARY_LOG_LEVEL)
    logging.basicConfig(level=libraries, format=fmt, stream=sys.stderr)
    for logger in ("graymq", *loud):
        logging.getLogger(logger).setLevel(chosen)


def print_ready(info: dict[str, Any]) -> None:
    """The one line test harnesses and scripts wait for: the server is serving at ``info['address']``."""
    print(READY_PREFIX + json.dumps(info, sort_keys=True), flush=True)


def print_json(obj: Any) -> None:
    print(json.dumps(obj, sort_keys=True, default=str), flush=True)


def add_nameserver_arg(parser: argparse.ArgumentParser) -> None:
    """``--nameserver``, and the environment variables of a name server client in the command's help."""
    parser.add_argument("--nameserver", default=None,
                        help="name server URL(s), comma-separated (default: $GRAYMQ_NAMESERVER)")
    parser.epilog = f"{parser.epilog}\n\n{NAMESERVER_ENV_HELP}" if parser.epilog else NAMESERVER_ENV_HELP
    parser.formatter_class = HelpFormatter


_SIZE = re.compile(r"(\d+)\s*([KMGT]?)(?:I?B)?", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
    """A byte size for argparse: ``65536``, ``64K``, ``64M``, ``1G`` (binary units; ``64MiB`` and ``64MB`` too).

    >>> parse_size("64M"), parse_size("1g"), parse_size("4096")
    (67108864, 1073741824, 4096)
    """
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"invalid size {text!r}: give bytes or a number with K, M or G (e.g. 64M)")
    return int(match[1]) * _SIZE_UNITS[match[2].upper()]


NUMBER_BOUNDS = "number_bounds"  # the parser default holding a command's NumberBound by destination


@dataclass(frozen=True)
class NumberBound:
    """The range of a number option: finite, from ``low`` (excluded when ``above_low``) to ``high``.

    >>> NumberBound("--timeout", 0, 604800, above_low=True, unit=" s").problem(float("inf"))
    '--timeout must be > 0 and <= 604800 s, got inf'
    >>> NumberBound("--fail-rate", 0, 1).problem(0.25) is None
    True
    """

    flag: str
    low: float
    high: float
    above_low: bool = False
    unit: str = ""

    def problem(self, value: float) -> str | None:
        """What is wrong with ``value``, in one line naming the flag and the range; None when it is in range."""
        if self.low < value <= self.high if self.above_low else self.low <= value <= self.high:  # nan fails both
            return None
        low, high = f"{self.low:g}", f"{self.high:g}"
        allowed = f"> {low} and <= {high}" if self.above_low else f"between {low} and {high}"
        return f"{self.flag} must be {allowed}{self.unit}, got {value:g}"


def seconds(flag: str, high: float, *, above_zero: bool = False) -> NumberBound:
    """The range of a duration option: from 0 (excluded when ``above_zero``) to ``high`` seconds."""
    return NumberBound(flag, 0, high, above_low=above_zero, unit=" s")


def add_number_arg(parser: argparse.ArgumentParser, flag: str, bound: NumberBound, **kwargs: Any) -> None:
    """Add the float option ``flag`` to ``parser``, its range checked by ``check_number_args`` after parsing."""
    action = parser.add_argument(flag, type=float, **kwargs)
    bounds = {**(parser.get_default(NUMBER_BOUNDS) or {}), action.dest: bound}
    parser.set_defaults(**{NUMBER_BOUNDS: bounds})


def add_wait_args(parser: argparse.ArgumentParser, flag: str, what: str, default_s: float) -> None:
    """A command's ``flag N`` (first wait until ``what``: N is in its text) and ``--wait-timeout`` (how long it
    waits; then exit 1 saying so)."""
    parser.add_argument(flag, type=int, metavar="N", help=f"first wait until {what}, at most --wait-timeout seconds")
    add_number_arg(parser, "--wait-timeout", seconds("--wait-timeout", MAX_TIMEOUT_S, above_zero=True),
                   default=default_s, metavar="S",
                   help=f"how long {flag} waits (default: {default_s:g}); then exit 1 saying so")


def add_timeout_arg(parser: argparse.ArgumentParser, **kwargs: Any) -> None:
    """A command's ``--timeout``: seconds above 0, at most ``MAX_TIMEOUT_S`` (a week)."""
    add_number_arg(parser, "--timeout", seconds("--timeout", MAX_TIMEOUT_S, above_zero=True),
                   **{"metavar": "S", **kwargs})


def check_number_args(args: argparse.Namespace) -> None:
    """Refuse, before any request, a number option out of its range (``add_number_arg``): a ConfigError naming it."""
    from graymq.protocol.errors import ConfigError

    for dest, bound in (getattr(args, NUMBER_BOUNDS, None) or {}).items():
        value = getattr(args, dest, None)
        problem = None if value is None else bound.problem(value)
        if problem:
            raise ConfigError(problem)


def check_name_args(args: argparse.Namespace) -> None:
    """Refuse a bad name before any request: the ``topic``/``topics``, ``group``/``producer_group``,
    ``client_id`` and ``lane`` arguments a command has are checked against the rule of ``protocol/names.py``; a
    broken one is a ConfigError naming it and the rule."""
    from graymq.protocol.errors import ConfigError
    from graymq.protocol.names import check_client_id, check_group_name, check_lane_name, check_topic_name

    topics = [getattr(args, "topic", None)]
    if getattr(args, "topics", None) is not None:
        topics += [t.strip() for t in args.topics.split(",") if t.strip()]
    groups = [getattr(args, "group", None), *(getattr(args, "producer_group", None) or [])]
    checks = [(check_topic_name, topics), (check_group_name, groups),
              (check_client_id, [getattr(args, "client_id", None)]), (check_lane_name, [getattr(args, "lane", None)])]
    for check, names in checks:
        for name in names:
            problem = None if name is None else check(name)
            if problem:
                raise ConfigError(problem)


def lane_of_args(args: argparse.Namespace) -> str | None:
    """The lane ``--gray`` or ``--lane`` names (``--gray`` is ``--lane gray``); both naming different lanes is a
    ConfigError.

    >>> from argparse import Namespace
    >>> lane_of_args(Namespace(gray=True, lane=None)), lane_of_args(Namespace(gray=False, lane="v3"))
    ('gray', 'v3')
    """
    from graymq.protocol.errors import ConfigError

    if args.gray and args.lane not in (None, "gray"):
        raise ConfigError(f"give --gray or --lane {args.lane}, not both (--gray is --lane gray)")
    return "gray" if args.gray else args.lane


def parse_labels(items: list[str] | None) -> dict[str, str]:
    """``k=v`` strings into a dict; a malformed one, or a key or value breaking the label rule of
    ``protocol/names.py``, is a ConfigError naming it."""
    from graymq.protocol.errors import ConfigError
    from graymq.protocol.names import check_label_key, check_label_value

    labels: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"label {item!r} is not k=v")
        if problem := check_label_key(key.strip()) or check_label_value(value.strip()):
            raise ConfigError(problem)
        labels[key.strip()] = value.strip()
    return labels


def table(rows: list[list[Any]], headers: list[str]) -> str:
    """A plain aligned text table."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def admin_nameserver_client(nameserver: str | None) -> NameServerClient:
    """The ops commands' name-server client: ``nameserver`` or ``GRAYMQ_NAMESERVER``; they read with the admin
    token too (``GRAYMQ_ADMIN_TOKEN``, else ``GRAYMQ_TOKEN``). The CLI is where these variables are read."""
    from graymq.client.config import ClientConfig
    from graymq.nameserver_api.client import NameServerClient

    config = ClientConfig.from_env(nameserver)
    admin_token = os.environ.get("GRAYMQ_ADMIN_TOKEN")
    return NameServerClient(config.nameserver, token=admin_token or config.token, admin_token=admin_token)


def run_with_nameserver(args: Any, command: Callable[[Any, Any], Awaitable[int]], *, need_broker: bool = False) -> int:
    """Check the names in ``args``, then run ``command(nameserver_client, args)`` on a fresh event loop, once the
    name server answers (and, with ``need_broker``, a broker registered: ``cluster_wait``); the client is closed
    after."""
    import asyncio

    from graymq.gray_controller.cli.cluster_wait import until_cluster_answers

    check_name_args(args)
    setup_logging(default="WARNING")

    async def main() -> int:
        ns = admin_nameserver_client(args.nameserver)
        try:
            await until_cluster_answers(ns, args.command, need_broker=need_broker)
            return await command(ns, args)
        finally:
            await ns.close()

    return asyncio.run(main())


class Interrupted(Exception):
    """SIGINT or SIGTERM arrived while ``until_interrupted`` was waiting; ``exit_code`` is 128 + the signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"signal {signum}")
        self.exit_code = 128 + signum


async def until_interrupted(work: Awaitable[T]) -> T:
    """Await ``work``; SIGINT or SIGTERM cancels it (its ``finally`` blocks run) and raises ``Interrupted``."""
    import asyncio
    import signal

    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(work)
    received: list[int] = []

    def on_signal(signum: int) -> None:
        received.append(signum)
        task.cancel()

    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        return await task
    except asyncio.CancelledError:
        if received:
            raise Interrupted(received[0]) from None
        raise
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)


def lane_name(text: str) -> str:
    """An argparse type: a lane's name, checked by the name rule (one line naming the rule when it breaks it)."""
    from graymq.protocol.names import check_lane_name

    problem = check_lane_name(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text
