"""``graymq bench``: run the benchmarks of ``bench/`` (the same options as ``python -m graymq.bench``)."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    from graymq.bench.runner import __doc__ as bench_doc
    from graymq.bench.runner import add_arguments

    p = subparsers.add_parser(
        "bench", help="run the benchmarks (graymq vs Redis Streams vs NATS JetStream, gray figures)",
        description=bench_doc, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from graymq.bench.runner import PARTS
    from graymq.bench.runner import run as run_bench
    from graymq.protocol.errors import ConfigError

    unknown = [p for p in args.parts if p not in PARTS]
    if unknown:
        raise ConfigError(f"unknown benchmark part(s) {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    return run_bench(args)
