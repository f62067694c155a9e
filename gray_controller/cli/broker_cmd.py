"""``graymq broker``: run one broker."""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from graymq.gray_controller.cli.common import print_ready, setup_logging
from graymq.protocol.errors import ConfigError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("broker", help="run a broker (commit log, consume queues, gray subscription tables)")
    p.add_argument("--name", help="broker name (GRAYMQ_BROKER_NAME)")
    p.add_argument("--host", help="listen address (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="listen port; 0 picks a free one (default 10911)")
    p.add_argument("--store", type=Path, help="store directory (GRAYMQ_BROKER_STORE_DIR)")
    p.add_argument("--nameserver",
                   help="name server URL(s), comma-separated (GRAYMQ_BROKER_NAMESERVER, else GRAYMQ_NAMESERVER)")
    p.add_argument("--flush", choices=["async", "sync"], help="flush mode (default async)")
    p.add_argument("--metrics-port", type=int, help="serve Prometheus metrics on this port (0 = free port)")
    p.add_argument("--advertised-address", help="host:port clients should dial, when not the bound address")
    p.add_argument("--segment-size", type=int, help="commit log segment bytes (default 1 GiB)")
    p.add_argument("--auto-create-topic", action="store_true", default=None, help="create unknown topics on send")
    p.set_defaults(handler=run)


def _nameserver_from_env() -> str | None:
    """``GRAYMQ_NAMESERVER`` only when the broker's own ``GRAYMQ_BROKER_NAMESERVER`` is not set."""
    if "GRAYMQ_BROKER_NAMESERVER" in os.environ:
        return None
    return os.environ.get("GRAYMQ_NAMESERVER")


def run(args: argparse.Namespace) -> int:
    from graymq.broker_ext.config import BrokerSettings
    from graymq.broker_ext.main import serve

    overrides = {
        "name": args.name, "host": args.host, "port": args.port, "store_dir": args.store,
        "nameserver": args.nameserver or _nameserver_from_env(), "flush": args.flush,
        "metrics_port": args.metrics_port, "advertised_address": args.advertised_address,
        "segment_size": args.segment_size, "auto_create_topic": args.auto_create_topic,
    }
    try:
        settings = BrokerSettings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        raise ConfigError(f"invalid broker settings: {exc}") from exc
    setup_logging()
    asyncio.run(serve(settings, print_ready))
    return 0
