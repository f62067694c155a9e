"""``--heartbeat-interval S`` of ``graymq consume`` and ``graymq produce``: how often the client heartbeats the name
server, else ``GRAYMQ_HEARTBEAT_INTERVAL_S``, else the client's default. The name server marks a client stale after
``GRAYMQ_CLIENT_STALE_SECONDS`` (default 15) without one: keep that window at least 3 intervals."""

from __future__ import annotations

import argparse
import os

from graymq.gray_controller.cli.common import add_number_arg, seconds
from graymq.protocol.errors import ConfigError

HEARTBEAT_ENV = "GRAYMQ_HEARTBEAT_INTERVAL_S"
MAX_HEARTBEAT_S = 600.0  # the CLI's longest cluster wait; a client this quiet is long stale anyway
BOUND = seconds("--heartbeat-interval", MAX_HEARTBEAT_S, above_zero=True)
ENV_HELP = (f"  {HEARTBEAT_ENV}  seconds between heartbeats to the name server, when --heartbeat-interval\n"
            "                       is not given (> 0, at most 600)")


def add_heartbeat_arg(parser: argparse.ArgumentParser, default_s: float) -> None:
    """``--heartbeat-interval S`` (checked by ``check_number_args``) and its variable in the environment table of
    the command's help (after ``add_nameserver_arg``)."""
    add_number_arg(parser, "--heartbeat-interval", BOUND, metavar="S",
                   help=f"seconds between heartbeats to the name server (default: ${HEARTBEAT_ENV}, else "
                        f"{default_s:g}); keep the name server's GRAYMQ_CLIENT_STALE_SECONDS at least 3 of them")
    parser.epilog = f"{parser.epilog or 'environment:'}\n{ENV_HELP}"


def heartbeat_interval(args: argparse.Namespace, default_s: float) -> float:
    """``--heartbeat-interval``, else ``GRAYMQ_HEARTBEAT_INTERVAL_S``, else ``default_s``; a bad variable is a
    ConfigError naming it and the fix.

    >>> heartbeat_interval(argparse.Namespace(heartbeat_interval=0.5), 5.0)
    0.5
    """
    if args.heartbeat_interval is not None:
        return float(args.heartbeat_interval)
    text = os.environ.get(HEARTBEAT_ENV, "").strip()
    if not text:
        return default_s
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if BOUND.problem(value):
        raise ConfigError(f"{HEARTBEAT_ENV} must be a number of seconds > 0 and <= {MAX_HEARTBEAT_S:g}, got "
                          f"{text!r}: set it to one (e.g. 1) or unset it for the default ({default_s:g})")
    return value
