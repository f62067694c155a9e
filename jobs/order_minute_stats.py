"""Run the order per-minute statistics job on graymq, as a gray or normal member of its group.

    python -m jobs.order_minute_stats run --nameserver URL --topic ORDERS --group ORDER_STATS \\
        --output DIR --checkpoint DIR [--gray | --normal] [--label version=v2] [--trigger-seconds 10]
    python -m jobs.order_minute_stats report --output DIR

Without ``--gray``/``--normal`` the side comes from the Spark conf ``spark.graymq.grayFlag``
(``spark-submit --conf spark.graymq.grayFlag=true …``), else normal. ``run`` follows the flag
the name server gives the job (drain then normal on a promote) until SIGTERM or Ctrl-C.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import SparkSession

from graymq.client.spark import StreamingJob
from graymq.client.spark.session import local_session
from graymq.protocol.errors import ConfigError, GrayMQError
from jobs.order_stats import minute_totals, pipeline


def _label(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"label {text!r} is not key=value")
    return key, value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="order_minute_stats", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run the streaming job")
    run.add_argument("--nameserver", required=True)
    run.add_argument("--topic", required=True, help="order event topic(s), comma-separated")
    run.add_argument("--group", required=True)
    run.add_argument("--output", required=True, help="Parquet output directory")
    run.add_argument("--checkpoint", required=True, help="checkpoint root (gray/ and normal/ under it)")
    side = run.add_mutually_exclusive_group()
    side.add_argument("--gray", dest="gray", action="store_const", const="true")
    side.add_argument("--normal", dest="gray", action="store_const", const="false")
    run.add_argument("--label", action="append", type=_label, default=[], help="k=v, for the group's gray rules")
    run.add_argument("--trigger-seconds", type=float, default=10.0)
    run.add_argument("--max-records-per-trigger", type=int)
    report = commands.add_parser("report", help="print the per-minute totals written so far")
    report.add_argument("--output", required=True)
    return parser


def run(spark: SparkSession, args: argparse.Namespace) -> None:
    options = {"nameserver": args.nameserver, "topics": args.topic, "group": args.group}
    if args.gray is not None:
        options["grayFlag"] = args.gray
    if args.max_records_per_trigger:
        options["maxRecordsPerTrigger"] = str(args.max_records_per_trigger)
    job = StreamingJob(spark, options, pipeline(args.output), args.checkpoint,
                       trigger={"processingTime": f"{args.trigger_seconds:g} seconds"}, labels=dict(args.label))
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    job.run(stop)


def _no_figures(output: str) -> str | None:
    """Why ``report`` has nothing to add up in a local ``output`` (None: it has, or the output is not local)."""
    if "://" in output or (Path(output) / "stats").is_dir():
        return None
    return (f"no figures in {output}/stats yet: the job writes them with its first micro-batch that got messages "
            f"(is `run --output {output}` running, and were messages sent to its side?)")


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for chatty in ("httpx", "py4j"):  # one line per HTTP request / Spark callback
        logging.getLogger(chatty).setLevel(logging.WARNING)
    args = build_parser().parse_args(argv)
    if args.command == "report" and (missing := _no_figures(args.output)):
        print(f"order_minute_stats: {missing}", file=sys.stderr)
        return 1
    spark = local_session("order-minute-stats", master="local[2]")
    try:
        if args.command == "run":
            run(spark, args)
        else:
            minute_totals(spark, args.output).show(truncate=False)
    except ConfigError as exc:
        print(f"order_minute_stats: {exc.message}", file=sys.stderr)
        return 2
    except GrayMQError as exc:
        print(f"order_minute_stats: {exc.message}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
