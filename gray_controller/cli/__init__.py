"""The ``graymq`` command: one entry point, each command group in its own module."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from graymq.protocol.errors import ConfigError, GrayMQError

# Each command module exposes ``register(subparsers)``; listed here in help order.
_COMMAND_MODULES: tuple[str, ...] = (
    "nameserver_cmd", "broker_cmd", "up_cmd", "topic_cmd", "produce_cmd", "consume_cmd", "gray_cmd", "bench_cmd",
)


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
        return handler(args)
    except ConfigError as exc:
        print(f"graymq {args.command}: {exc.message}", file=sys.stderr)
        return 2
    except GrayMQError as exc:
        print(f"graymq {args.command}: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
