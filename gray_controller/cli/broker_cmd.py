"""``graymq broker``: run one broker."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from graymq.gray_controller.cli import moved_aside_cmd, verify_cmd
from graymq.gray_controller.cli.common import SERVER_LOG_HELP, HelpFormatter, parse_size, print_ready, setup_logging
from graymq.gray_controller.cli.port_holder import BIND_ERRORS, bind_failure, bound_address
from graymq.protocol import loop
from graymq.protocol.errors import ConfigError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "broker", help="run a broker (commit log, consume queues, gray subscription tables)",
        description="Run a broker until SIGTERM/SIGINT. GRAYMQ_BROKER_* variables configure it "
                    "(e.g. GRAYMQ_BROKER_RETENTION_HOURS); flags override them. Outside dev mode every "
                    "connection authenticates with a principal's token, checked against the principals the "
                    "broker learns from its name server (and keeps enforcing while that is down).",
        epilog="environment (besides the variables named above):\n"
               "  GRAYMQ_BROKER_TOKEN  token of a principal with the broker right: registers with the name\n"
               "                       server and reads its principals (required outside dev mode)\n"
               "  GRAYMQ_DEV_MODE      true: authentication off, logged as a warning (same as --dev)\n"
               + SERVER_LOG_HELP,
        formatter_class=HelpFormatter,
    )
    p.add_argument("--name", help="broker name (GRAYMQ_BROKER_NAME, default broker-a)")
    p.add_argument("--host", help="listen address (GRAYMQ_BROKER_HOST, default 127.0.0.1)")
    p.add_argument("--port", type=int, help="listen port; 0 picks a free one (GRAYMQ_BROKER_PORT, default 10911)")
    p.add_argument("--store", type=Path,
                   help="store directory (GRAYMQ_BROKER_STORE_DIR, default ./graymq-data/broker)")
    p.add_argument("--nameserver",
                   help="name server URL(s), comma-separated (GRAYMQ_BROKER_NAMESERVER, else GRAYMQ_NAMESERVER; "
                        "none: standalone)")
    p.add_argument("--flush", choices=["async", "sync"], help="flush mode (GRAYMQ_BROKER_FLUSH, default async)")
    p.add_argument("--metrics-port", type=int, help="serve Prometheus metrics on this port (0 = free port)")
    p.add_argument("--grpc-port", type=int, metavar="P",
                   help="serve RocketMQ 5 gRPC (MessagingService) for the stock RocketMQ SDKs on this port, over TLS "
                   "with --tls-cert/--tls-key (0 = free port; GRAYMQ_BROKER_GRPC_PORT, default off)")
    p.add_argument("--advertised-address", help="host:port clients should dial, when not the bound address")
    p.add_argument("--segment-size", type=parse_size, metavar="SIZE",
                   help="commit log segment size for a new store: bytes or 64M, 1G... (GRAYMQ_BROKER_SEGMENT_SIZE "
                        "in bytes, default 1G; an existing store keeps its own)")
    p.add_argument("--auto-create-topic", action="store_true", default=None,
                   help="create unknown topics on send (dev mode only: topics are otherwise created by admins "
                        "through the name server)")
    p.add_argument("--dev", action="store_true", default=None,
                   help="dev mode: authentication off, logged as a warning (GRAYMQ_DEV_MODE)")
    p.add_argument("--tls-cert", type=Path, metavar="FILE",
                   help="PEM certificate: the broker port speaks TLS only (GRAYMQ_BROKER_TLS_CERT; with --tls-key)")
    p.add_argument("--tls-key", type=Path, metavar="FILE", help="PEM private key of --tls-cert (GRAYMQ_BROKER_TLS_KEY)")
    p.add_argument("--replica-id", type=int, metavar="N",
                   help="this broker's id in its broker set: brokers with one --name and distinct ids replicate "
                   "(GRAYMQ_BROKER_REPLICA_ID, default 0)")
    p.add_argument("--replication", choices=["sync", "async"],
                   help="a broker set: sync acknowledges a send once the in-sync replicas stored it, async once the "
                   "leader did (GRAYMQ_BROKER_REPLICATION; default: none, a single copy)")
    p.set_defaults(handler=run)
    # graymq broker verify|moved-aside --store DIR: offline work on a store instead of running a broker
    commands = p.add_subparsers(dest="broker_command", metavar="verify|moved-aside", required=False,
                                title="offline work on a store (instead of running a broker)")
    verify_cmd.register(commands)
    moved_aside_cmd.register(commands)


def _nameserver_from_env() -> str | None:
    """``GRAYMQ_NAMESERVER`` only when the broker's own ``GRAYMQ_BROKER_NAMESERVER`` is not set."""
    if "GRAYMQ_BROKER_NAMESERVER" in os.environ:
        return None
    return os.environ.get("GRAYMQ_NAMESERVER")


def _source(field: str, overrides: dict[str, object]) -> str:
    """The flag that set ``field``, else its environment variable."""
    if overrides.get(field) is None:
        return "GRAYMQ_DEV_MODE" if field == "dev_mode" else f"GRAYMQ_BROKER_{field.upper()}"
    flags = {"store_dir": "--store", "dev_mode": "--dev"}
    return flags.get(field) or "--" + field.replace("_", "-")


def run(args: argparse.Namespace) -> int:
    from graymq.broker_ext.config import BrokerSettings
    from graymq.broker_ext.main import serve

    overrides = {
        "name": args.name, "host": args.host, "port": args.port, "store_dir": args.store,
        "nameserver": args.nameserver or _nameserver_from_env(), "flush": args.flush,
        "metrics_port": args.metrics_port, "grpc_port": args.grpc_port, "advertised_address": args.advertised_address,
        "segment_size": args.segment_size, "auto_create_topic": args.auto_create_topic, "dev_mode": args.dev,
        "tls_cert": args.tls_cert, "tls_key": args.tls_key, "replica_id": args.replica_id,
        "replication": args.replication,
    }
    try:
        settings = BrokerSettings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        raise ConfigError("invalid broker settings: " + "; ".join(
            (f"{_source(str(e['loc'][0]), overrides)}: " if e["loc"] else "") + str(e["msg"]).removeprefix(
                "Value error, ") for e in exc.errors())) from exc
    setup_logging()
    try:
        loop.run(serve(settings, print_ready))  # uvloop when installed (the fast extra), else asyncio's loop
    except OSError as exc:
        if exc.errno not in BIND_ERRORS:
            raise
        print(f"graymq broker: {bind_failure(*bound_address(exc, settings.host, settings.port), exc)}",
              file=sys.stderr)
        return 1
    return 0
