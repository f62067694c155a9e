"""The ``graymq`` command: one entry point, each command group in its own module."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from graymq.gray_controller.cli.common import NAMESERVER_ENV_HELP, HelpFormatter, check_number_args
from graymq.protocol.errors import ConfigError, GrayMQError

# Each command module exposes ``register(subparsers)``; listed here in help order.
_COMMAND_MODULES: tuple[str, ...] = (
    "nameserver_cmd", "broker_cmd", "up_cmd", "topic_cmd", "group_cmd", "produce_cmd", "consume_cmd", "gray_cmd",
    "audit_cmd", "principal_cmd", "bench_cmd",
)

_EPILOG = NAMESERVER_ENV_HELP + """
  GRAYMQ_DEV_MODE      true: the name server runs with authentication off (graymq up sets it)
  GRAYMQ_DB_URL        the name server's database (see graymq nameserver --help)
  GRAYMQ_BROKER_*      broker settings (see graymq broker --help)

start with:  graymq up   then, in another shell:  export GRAYMQ_NAMESERVER=http://127.0.0.1:9876
`graymq COMMAND --help` shows the options and defaults of a command."""


def build_parser() -> argparse.ArgumentParser:
    import importlib
    from importlib.metadata import PackageNotFoundError, version

    try:
        own_version = version("graymq")
    except PackageNotFoundError:
        own_version = "unknown"
    parser = argparse.ArgumentParser(
        prog="graymq",
        description="graymq: gray-release messaging — name server, broker, clients and cutover tools.",
        epilog=_EPILOG,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"graymq {own_version}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        importlib.import_module(f"graymq.gray_controller.cli.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        check_number_args(args)
        return handler(args)
    except ConfigError as exc:
        print(f"graymq {args.command}: {exc.message}", file=sys.stderr)
        return 2
    except GrayMQError as exc:
        print(f"graymq {args.command}: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
