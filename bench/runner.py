"""``python -m graymq.bench`` / ``graymq bench``: every benchmark, or the named parts, in one run.

    python -m graymq.bench [PART ...] [--count N] [--repeat R] [--rate R] [--duration S] ...

Parts (default: all, in this order):

- ``peers``      the headline comparison (issue 21): graymq (also on uvloop, and with sync flush) vs Redis
                 Streams with redis-py's sync client and hiredis (and redis.asyncio) vs NATS JetStream with
                 nats-py: batched produce, awaited single sends, consume, and a 5,000 msg/s e2e with awaited sends;
- ``awaited``    awaited single sends with graymq's BlockingProducer and Producer beside redis-py's blocking
                 client with hiredis: msg/s, p50/p99, CPU µs per message, the load and the echo round trip;
- ``store``      message store in-process: append async/sync, single/batched, reads;
- ``broker``     a broker process with the raw ``BrokerClient``: produce/consume, single/batched, async/sync;
- ``trust``      the same raw produce/consume, single/batched, in dev mode, with authentication, and with
                 authentication over TLS: msgs/s, MiB/s and the cost of each against dev mode;
- ``throughput`` graymq (client library) vs Redis Streams vs NATS JetStream: produce then consume N 1 KiB
                 messages, single and batched, async and sync flush; msgs/s, MiB/s, server peak RSS;
- ``latency``    the three at a fixed rate, producer and consumer processes: p50/p99/max end to end;
- ``gray``       promote timings, drain rate of a gray backlog, rebalance convergence with 50 consumers, a weight
                 change reaching every consumer, a failed rollout check to the rollback complete;
- ``nameserver`` flag flip and group lookup latency on PostgreSQL;
- ``groupscale`` convergence of groups of ``--group-sizes`` consumers over several processes (join, leave, CPU),
                 a fifth gray, then the same fifth spread over 3 lanes;
- ``replication`` produce on one broker vs a broker set of two replicas, sync and async: batched, awaited p50/p99;
- ``tracing``    the client's span hooks per message and awaited sends, with OpenTelemetry off and on;
- ``stocksdk``   the stock RocketMQ 5 Python SDK on the broker's gRPC endpoint (awaited and async sends, receive
                 and ack) beside graymq's own client;
- ``spark``      the Spark source's batch read and the Spark sink's batch write (local[2], ``--spark-count`` rows of
                 1 KiB): rows/s side by side; without pyspark or Java it says so in one line and the run goes on.
- ``lanes``      a group of 200's rebalance and the send path's side and queue choice, base + gray against base + 3
                 lanes (bench_lanes.py, no network);
- ``fleet``      ``--fleet-clients`` producers and consumers over ``--fleet-processes`` worker processes (one client
                 instance each), a tenth of them stock RocketMQ 5 SDK clients on the brokers' gRPC endpoint (five
                 pods of their own), name server on PostgreSQL, two brokers: steady CPU per second of each server,
                 the stock clients listed, a gray switch flip reaching every consumer of a 500-consumer group, its
                 join and leave convergence, the servers' memory (bench_fleet.py, fleet_stock.py).

Every case runs ``--repeat`` times (interleaved with the other cases, so a burst of load from
elsewhere on the machine hits all of them alike) and the median of each figure is reported.
Figures go to stdout as tables, to ``bench/results.json`` and to ``bench/RESULTS.md`` (with PNG charts
beside it, ``bench/charts.py``); a block
between ``<!-- notes -->`` and ``<!-- /notes -->`` in an existing RESULTS.md is kept.
``redis-server`` and ``nats-server`` are installed from Debian packages when missing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime as dt
import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from graymq.bench.common import BATCH, BATCH_IN_FLIGHT, BODY_SIZE, SINGLE_IN_FLIGHT, Figures, machine_info, tool_version

PARTS = ("peers", "awaited", "store", "broker", "trust", "throughput", "latency", "gray", "nameserver", "groupscale",
         "replication", "tracing", "stocksdk", "profile", "spark", "lanes", "fleet")
HERE = Path(__file__).resolve().parent
NOTES_START, NOTES_END = "<!-- notes -->", "<!-- /notes -->"


# ---------------------------------------------------------------- repetition and medians

def median_figures(samples: list[Figures]) -> Figures:
    """Per key: the median of the numeric values of the runs that succeeded (NaN ignored), else the
    first value; ``failed_runs`` counts the others. All failed: the first error."""
    ok = [s for s in samples if "error" not in s]
    if not ok:
        return dict(samples[0])
    out: Figures = {}
    for key in ok[0]:
        values = [s.get(key) for s in ok]
        numbers = [v for v in values if isinstance(v, int | float) and not (isinstance(v, float) and math.isnan(v))]
        out[key] = statistics.median(numbers) if numbers else values[0]
    if len(ok) < len(samples):
        out["failed_runs"] = len(samples) - len(ok)
    return out


class Results:
    """``cases[part][case] = {"median": figures, "samples": [figures, ...]}``."""

    def __init__(self) -> None:
        self.parts: dict[str, dict[str, dict[str, Any]]] = {}

    def add(self, part: str, case: str, figures: Figures) -> None:
        entry = self.parts.setdefault(part, {}).setdefault(case, {"samples": []})
        entry["samples"].append(figures)
        entry["median"] = median_figures(entry["samples"])

    def median(self, part: str, case: str) -> Figures | None:
        entry = self.parts.get(part, {}).get(case)
        return entry["median"] if entry else None


def progress(text: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def run_repeated(results: Results, part: str, cases: Sequence[tuple[str, Callable[[], Figures]]],
                 repeat: int) -> None:
    for round_no in range(repeat):
        for case, fn in cases:
            progress(f"{part}: {case} (run {round_no + 1}/{repeat})")
            # Earlier cases' files (commit logs, AOFs, JetStream blocks) would otherwise be written back by
            # the kernel while this one runs: every case starts with no dirty pages.
            os.sync()
            try:
                results.add(part, case, fn())
            except Exception as exc:  # noqa: BLE001 - one failed case is reported, the rest still run
                progress(f"{part}: {case} FAILED: {type(exc).__name__}: {exc}")
                results.add(part, case, {"error": f"{type(exc).__name__}: {exc}"})


# ---------------------------------------------------------------- the parts

@contextlib.contextmanager
def postgres_server() -> Iterator[Any]:
    from graymq.devkit.postgres import PostgresServer

    server = PostgresServer()
    server.start()
    try:
        yield server
    finally:
        server.destroy()


def part_peers(results: Results, args: argparse.Namespace, root: Path) -> None:
    from graymq.bench import bench_peers as peers
    from graymq.bench.graymq_servers import NameServer

    args.meta["echo_rtt_us"] = peers.echo_rtt_us()
    load_before = os.getloadavg()[0]
    count, awaited, duration = args.peer_count, args.awaited_count, args.e2e_duration

    def in_tmp(fn: Callable[[Path], Figures]) -> Callable[[], Figures]:
        def case() -> Figures:
            with tempfile.TemporaryDirectory(dir=root) as tmp:
                return fn(Path(tmp))
        return case

    with NameServer(root / "ns-peers", root).wait_ready() as ns:
        graymq_cases = [
            ("graymq", lambda tmp: peers.graymq_case(ns, tmp, root, count, awaited)),
            ("graymq uvloop", lambda tmp: peers.graymq_case(ns, tmp, root, count, awaited, uvloop=True)),
            ("graymq sync flush", lambda tmp: peers.graymq_case(ns, tmp, root, count, awaited, flush="sync")),
        ]
        peer_cases = [
            ("redis hiredis", lambda tmp: peers.redis_case(tmp, root, count, awaited)),
            ("redis asyncio", lambda tmp: peers.redis_case(tmp, root, count, awaited, asyncio_client=True)),
            ("nats", lambda tmp: peers.nats_case(tmp, root, count, awaited)),
        ] if not args.only_graymq else []
        e2e_cases = [
            ("graymq", lambda tmp: peers.graymq_e2e_case(ns, tmp, root, duration)),
            ("graymq uvloop", lambda tmp: peers.graymq_e2e_case(ns, tmp, root, duration, uvloop=True)),
            ("graymq BlockingProducer", lambda tmp: peers.graymq_e2e_case(ns, tmp, root, duration, blocking=True)),
            *([("redis hiredis", lambda tmp: peers.redis_e2e_case(tmp, root, duration)),
               ("nats", lambda tmp: peers.nats_e2e_case(tmp, root, duration))] if not args.only_graymq else []),
        ]
        run_repeated(results, "peers", [(name, in_tmp(fn)) for name, fn in [*graymq_cases, *peer_cases]],
                     args.repeat)
        run_repeated(results, "peers e2e", [(name, in_tmp(fn)) for name, fn in e2e_cases], args.repeat)
    args.meta["peers_load"] = f"{load_before:.2f} at start, {os.getloadavg()[0]:.2f} at end (1 min)"


def part_awaited(results: Results, args: argparse.Namespace, root: Path) -> None:
    from graymq.bench import bench_awaited
    from graymq.bench.bench_peers import echo_rtt_us
    from graymq.bench.graymq_servers import NameServer

    args.meta["awaited_echo_rtt_us"] = echo_rtt_us()
    with NameServer(root / "ns-awaited", root).wait_ready() as ns:
        cases = bench_awaited.cases(ns, root, root, args.awaited_count, not args.only_graymq)

        def in_tmp(fn: Callable[[Path], Figures]) -> Callable[[], Figures]:
            return lambda: fn(Path(tempfile.mkdtemp(dir=root)))

        run_repeated(results, "awaited", [(name, in_tmp(fn)) for name, fn in cases], args.repeat)


def part_groupscale(results: Results, args: argparse.Namespace, root: Path) -> None:
    from graymq.bench import bench_group_scale
    from graymq.bench.common import quiet_logs
    from graymq.bench.graymq_servers import NameServer

    with NameServer(root / "ns-groupscale", root).wait_ready() as ns, quiet_logs():
        cases = []
        for size in args.group_sizes:
            for lanes, label in ((("gray",), ""), (("v2", "v3", "v4"), ", base + 3 lanes")):
                def fn(size: int = size, lanes: tuple[str, ...] = lanes) -> Figures:
                    with tempfile.TemporaryDirectory(dir=root) as tmp:
                        return bench_group_scale.group_scale_case(ns, Path(tmp), root, size,
                                                                  max(1, math.ceil(size / 100)), lanes)
                cases.append((f"{size} consumers{label}", fn))
        run_repeated(results, "groupscale", cases, args.repeat)


def part_store(results: Results, args: argparse.Namespace, root: Path) -> None:
    from graymq.bench import bench_store

    def once() -> dict[str, Figures]:
        with tempfile.TemporaryDirectory(dir=root) as tmp:
            return asyncio.run(bench_store.main_async(Path(tmp), args.store_count, 64, quiet=True))

    for round_no in range(args.repeat):
        progress(f"store (run {round_no + 1}/{args.repeat})")
        for case, figures in once().items():
            results.add("store", case, figures)


def part_broker(results: Results, args: argparse.Namespace, root: Path) -> None:
    from graymq.bench import bench_broker

    cases = []
    for i, (flush, mode) in enumerate(bench_broker.CASES):
        def fn(flush: str = flush, mode: str = mode, i: int = i) -> Figures:
            with tempfile.TemporaryDirectory(dir=root) as tmp:
                return asyncio.run(bench_broker.run_case(Path(tmp), root, flush, mode == "batch", args.count,
                                                         f"raw{i}"))
        cases.append((f"{flush}/{mode}", fn))
    run_repeated(results, "broker", cases, args.repeat)


def part_trust(results: Results, args: argparse.Namespace, root: Path) -> None:
    from graymq.bench import bench_trust

    with bench_trust.trust_setup(root, root) as setup:
        cases = []
        for config, mode in bench_trust.CASES:
            def fn(config: str = config, mode: str = mode) -> Figures:
                with tempfile.TemporaryDirectory(dir=root) as tmp:
                    return asyncio.run(bench_trust.run_case(setup, Path(tmp), root, config, mode == "batch",
                                                            args.count))
            cases.append((f"{config}/{mode}", fn))
        run_repeated(results, "trust", cases, args.repeat)


def part_throughput(results: Results, args: argparse.Namespace, root: Path) -> None:
    from graymq.bench import bench_client, bench_nats, bench_redis
    from graymq.bench.graymq_servers import NameServer

    with NameServer(root / "ns-throughput", root).wait_ready() as ns:
        cases: list[tuple[str, Callable[[], Figures]]] = []
        for flush in ("async", "sync"):
            for mode in ("single", "auto", "batch"):
                def graymq(flush: str = flush, mode: str = mode) -> Figures:
                    with tempfile.TemporaryDirectory(dir=root) as tmp:
                        return asyncio.run(bench_client.throughput_case(ns, Path(tmp), root, flush, mode == "batch",
                                                                        args.count, auto_batch=mode != "single"))
                cases.append((f"graymq/{flush}/{mode}", graymq))
        for fsync, flush in (("everysec", "async"), ("always", "sync")) if not args.only_graymq else ():
            for mode in ("single", "batch"):
                def redis(fsync: str = fsync, mode: str = mode) -> Figures:
                    with tempfile.TemporaryDirectory(dir=root) as tmp:
                        return asyncio.run(bench_redis.throughput_case(Path(tmp), root, fsync, mode == "batch",
                                                                       args.count, f"redis-{fsync}-{mode}"))
                cases.append((f"redis/{flush}/{mode}", redis))
        for mode in ("single", "batch") if not args.only_graymq else ():
            def nats(mode: str = mode) -> Figures:
                with tempfile.TemporaryDirectory(dir=root) as tmp:
                    return asyncio.run(bench_nats.throughput_case(Path(tmp), root, mode == "batch", args.count,
                                                                  f"nats-{mode}"))
            cases.append((f"nats/async/{mode}", nats))
        run_repeated(results, "throughput", cases, args.repeat)


def part_latency(results: Results, args: argparse.Namespace, root: Path) -> None:
    from graymq.bench import bench_client, bench_nats, bench_redis
    from graymq.bench.graymq_servers import NameServer

    with NameServer(root / "ns-latency", root).wait_ready() as ns:
        def graymq(auto_batch: bool = True) -> Figures:
            with tempfile.TemporaryDirectory(dir=root) as tmp:
                return bench_client.latency_case(ns, Path(tmp), root, args.rate, args.duration, auto_batch)

        def redis() -> Figures:
            with tempfile.TemporaryDirectory(dir=root) as tmp:
                return bench_redis.latency_case(Path(tmp), root, args.rate, args.duration)

        def nats() -> Figures:
            with tempfile.TemporaryDirectory(dir=root) as tmp:
                return bench_nats.latency_case(Path(tmp), root, args.rate, args.duration)

        peers = [("redis", redis), ("nats", nats)] if not args.only_graymq else []
        cases = [("graymq", graymq), ("graymq auto_batch=False", lambda: graymq(False)), *peers]
        run_repeated(results, "latency", cases, args.repeat)


def part_gray(results: Results, args: argparse.Namespace, root: Path, postgres: Any) -> None:
    from graymq.bench import bench_canary, bench_gray
    from graymq.bench.common import quiet_logs
    from graymq.bench.graymq_servers import NameServer

    with NameServer(root / "ns-gray", root, postgres.create_database("bench_gray")).wait_ready() as ns:
        def run(coro_fn: Callable[[Path], Any]) -> Callable[[], Figures]:
            def fn() -> Figures:
                with tempfile.TemporaryDirectory(dir=root) as tmp, quiet_logs():
                    return asyncio.run(coro_fn(Path(tmp)))
            return fn

        run_repeated(results, "gray", [
            ("promote", run(lambda tmp: bench_gray.promote_case(ns, tmp, root))),
            ("drain", run(lambda tmp: bench_gray.drain_case(ns, tmp, root, args.gray_backlog))),
            ("rebalance", run(lambda tmp: bench_gray.rebalance_case(ns, tmp, root, args.consumers))),
            ("canary weight", run(lambda tmp: bench_canary.weight_case(ns, tmp, root))),
            ("canary rollback", run(lambda tmp: bench_canary.rollback_case(ns, tmp, root))),
        ], args.repeat)


def part_nameserver(results: Results, args: argparse.Namespace, root: Path, postgres: Any) -> None:
    from graymq.bench import bench_nameserver

    for round_no in range(args.repeat):
        progress(f"nameserver (run {round_no + 1}/{args.repeat})")
        for case, figures in bench_nameserver.measure(postgres, f"bench_nameserver_{round_no}", 200,
                                                      args.ns_calls).items():
            results.add("nameserver", case, figures)


def part_fleet(results: Results, args: argparse.Namespace, root: Path, postgres: Any) -> None:
    from graymq.bench import bench_fleet
    from graymq.bench.common import quiet_logs
    from graymq.bench.graymq_servers import NameServer

    def fn() -> Figures:
        with tempfile.TemporaryDirectory(dir=root) as tmp, NameServer(
                Path(tmp) / "ns", root, postgres.create_database("bench_fleet")).wait_ready() as ns:
            return bench_fleet.fleet_case(ns, Path(tmp), root, args.fleet_clients, args.fleet_processes)

    with quiet_logs():
        run_repeated(results, "fleet", [(f"{args.fleet_clients} clients, {args.fleet_processes} processes", fn)],
                     args.repeat)


def part_replication(results: Results, args: argparse.Namespace, root: Path) -> None:
    from graymq.bench import bench_replication

    progress(f"replication ({args.repeat} run(s) of each setup, interleaved)")
    for label, samples in bench_replication.run(root / "replication", 30_000, 3_000, args.repeat).items():
        for figures in samples:
            results.add("replication", label, figures)


def part_tracing(results: Results, args: argparse.Namespace, root: Path) -> None:
    from graymq.bench import bench_tracing

    for round_no in range(args.repeat):
        progress(f"tracing (run {round_no + 1}/{args.repeat})")
        for label, figures in bench_tracing.run(3_000).items():
            results.add("tracing", label, figures)


def part_lanes(results: Results, args: argparse.Namespace, root: Path) -> None:
    """What lanes cost: a group's rebalance and the send path, base + gray against base + 3 lanes (bench_lanes.py)."""
    from graymq.bench import bench_lanes

    for round_no in range(args.repeat):
        progress(f"lanes (run {round_no + 1}/{args.repeat})")
        for label, figures in bench_lanes.run().items():
            results.add("lanes", label, figures)


def part_profile(results: Results, args: argparse.Namespace, root: Path) -> None:
    """The broker's own CPU by function on the batched and awaited send paths (bench_profile.py), printed."""
    from graymq.bench import bench_profile

    for result in bench_profile.run(root):
        results.add("profile", result["case"], result)


def part_stocksdk(results: Results, args: argparse.Namespace, root: Path) -> None:
    from graymq.bench import bench_stock_sdk

    for round_no in range(args.repeat):
        progress(f"stocksdk (run {round_no + 1}/{args.repeat})")
        for label, figures in bench_stock_sdk.run(2_000).items():
            results.add("stocksdk", label, figures)


def part_spark(results: Results, args: argparse.Namespace, root: Path) -> None:
    from graymq.bench import bench_spark

    reason = bench_spark.missing()
    if reason:
        progress(f"spark: not run: {reason}")
        args.meta["spark_skipped"] = reason
        return
    settings = bench_spark.Settings(count=args.spark_count, rounds=1 + args.repeat)
    args.meta["spark_settings"] = dataclasses.asdict(settings)
    progress(f"spark: source and sink, {settings.count:,} rows, {settings.rounds} rounds (the first is not counted)")
    try:
        for case, samples in bench_spark.run(root, settings).items():
            for figures in samples:
                results.add("spark", case, figures)
    except Exception as exc:  # noqa: BLE001 - a failed part is reported, the rest still run
        progress(f"spark FAILED: {type(exc).__name__}: {exc}")
        results.add("spark", "source and sink", {"error": f"{type(exc).__name__}: {exc}"})


# ---------------------------------------------------------------- rendering

def fmt(value: Any, kind: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, str):
        return value
    if kind == "rate":
        return f"{value:,.0f}"
    if kind == "ratio":
        return f"{value:.2f}×"
    if kind == "int":
        return f"{int(value):,}"
    return f"{value:,.1f}" if abs(value) >= 100 else f"{value:.2f}"


def table(headers: list[str], rows: list[list[str]]) -> str:
    """A Markdown table (it reads as a plain table on a terminal too)."""
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"  # noqa: E731
    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def _error_row(name: str, figures: Figures, width: int) -> list[str]:
    return [name, f"FAILED: {figures['error']}", *[""] * (width - 2)]


def render_throughput(results: Results, part: str, title: str) -> list[str]:
    cases = results.parts.get(part)
    if not cases:
        return []
    headers = ["case", "produce msg/s", "MiB/s", "consume msg/s", "MiB/s", "server peak RSS MiB",
               "CPU µs/msg produce: server / client", "consume: server / client"]
    rows = []
    for case, entry in cases.items():
        f = entry["median"]
        if "error" in f:
            rows.append(_error_row(case, f, len(headers)))
            continue
        rows.append([case + (f" ({f['failed_runs']} run failed)" if f.get("failed_runs") else ""),
                     fmt(f["produce_msgs_s"], "rate"), fmt(f["produce_mib_s"]), fmt(f["consume_msgs_s"], "rate"),
                     fmt(f["consume_mib_s"]), fmt(f["broker_peak_rss_mib"]),
                     f"{fmt(f.get('produce_broker_cpu_us'))} / {fmt(f.get('produce_client_cpu_us'))}",
                     f"{fmt(f.get('consume_broker_cpu_us'))} / {fmt(f.get('consume_client_cpu_us'))}"])
    return [f"### {title}", "", table(headers, rows), ""]


def _percent(value: float | None) -> str:
    return "–" if value is None or math.isnan(value) else f"{value:+.1f} %"


def render_trust(results: Results) -> list[str]:
    from graymq.bench.bench_trust import cost_pct

    cases = results.parts.get("trust")
    if not cases:
        return []
    headers = ["case", "produce msg/s", "MiB/s", "cost", "consume msg/s", "MiB/s", "cost",
               "CPU µs/msg produce: server / client", "consume: server / client", "CPU cost produce / consume"]
    rows = []
    for case, entry in cases.items():
        f = entry["median"]
        dev = results.median("trust", "dev/" + case.rpartition("/")[2])
        if "error" in f:
            rows.append(_error_row(case, f, len(headers)))
            continue
        costs = cost_pct(f, dev) if dev and "error" not in dev and not case.startswith("dev/") else {}
        pct = {key: _percent(costs.get(key)) for key in
               ("produce_cost_pct", "consume_cost_pct", "produce_cpu_cost_pct", "consume_cpu_cost_pct")}
        rows.append([case + (f" ({f['failed_runs']} run failed)" if f.get("failed_runs") else ""),
                     fmt(f["produce_msgs_s"], "rate"), fmt(f["produce_mib_s"]), pct["produce_cost_pct"],
                     fmt(f["consume_msgs_s"], "rate"), fmt(f["consume_mib_s"]), pct["consume_cost_pct"],
                     f"{fmt(f['produce_broker_cpu_us'])} / {fmt(f['produce_client_cpu_us'])}",
                     f"{fmt(f['consume_broker_cpu_us'])} / {fmt(f['consume_client_cpu_us'])}",
                     f"{pct['produce_cpu_cost_pct']} / {pct['consume_cpu_cost_pct']}"])
    return ["### Authentication and TLS on the broker path (raw BrokerClient, flush async)", "", table(headers, rows),
            "", "`dev`: dev mode, plain TCP, no token; `auth`: every connection authenticates with a principal's token "
            "and every request is checked against its rights; `auth+tls`: the same over TLS (TLS 1.2+, P-256 "
            "certificate). `cost`: how much lower the rate is than `dev`'s of the same mode; `CPU cost`: how much "
            "more CPU (broker + client) a message takes. Negative figures are noise.", ""]


def ratio_rows(results: Results) -> list[list[str]]:
    rows = []
    for flush in ("async", "sync"):
        for mode in ("single", "batch"):
            ours = results.median("throughput", f"graymq/{flush}/{mode}")
            for peer in ("redis", "nats"):
                theirs = results.median("throughput", f"{peer}/{flush}/{mode}")
                if not ours or not theirs or "error" in ours or "error" in theirs:
                    continue
                rows.append([f"{flush}/{mode}", f"graymq / {peer}",
                             fmt(ours["produce_msgs_s"] / theirs["produce_msgs_s"], "ratio"),
                             fmt(ours["consume_msgs_s"] / theirs["consume_msgs_s"], "ratio")])
    return rows


def render_latency(results: Results) -> list[str]:
    cases = results.parts.get("latency")
    if not cases:
        return []
    headers = ["system", "rate msg/s", "p50 ms", "p99 ms", "max ms", "send errors", "lost",
               "CPU µs/msg producer / consumer / server", "graymq p99 / this p99"]
    ours = results.median("latency", "graymq")
    rows = []
    for case, entry in cases.items():
        f = entry["median"]
        if "error" in f:
            rows.append(_error_row(case, f, len(headers)))
            continue
        vs = (fmt(ours["p99_ms"] / f["p99_ms"], "ratio") if ours and "error" not in ours
              and not case.startswith("graymq") else "")
        rows.append([case, fmt(f["rate_msgs_s"], "rate"), fmt(f["p50_ms"]), fmt(f["p99_ms"]), fmt(f["max_ms"]),
                     fmt(f.get("send_errors"), "int"), fmt(f.get("lost"), "int"),
                     f"{fmt(f.get('producer_cpu_us'))} / {fmt(f.get('consumer_cpu_us'))} / "
                     f"{fmt(f.get('server_cpu_us'))}", vs])
    return ["### Latency, end to end at a fixed rate", "", table(headers, rows), "",
            "Last column: graymq's p99 (default producer) over this system's p99; below 1, graymq is faster.", ""]


def render_figures(results: Results, part: str, title: str, labels: dict[str, str] | None = None) -> list[str]:
    cases = results.parts.get(part)
    if not cases:
        return []
    rows = []
    for case, entry in cases.items():
        for key, value in entry["median"].items():
            rows.append([case, (labels or {}).get(key, key), fmt(value)])
    return [f"### {title}", "", table(["case", "figure", "median"], rows), ""]


def targets(results: Results) -> list[list[str]]:
    """The issue's goals, each with the figures that decide it."""
    rows = []
    t = lambda case: results.median("throughput", case)  # noqa: E731

    def ok(flag: bool) -> str:
        return "met" if flag else "not met"

    g, r, n = t("graymq/async/batch"), t("redis/async/batch"), t("nats/async/batch")
    if g and r and "error" not in g and "error" not in r:
        rows.append(["batched produce ≥ Redis Streams", f"{fmt(g['produce_msgs_s'], 'rate')} vs "
                     f"{fmt(r['produce_msgs_s'], 'rate')} msg/s", ok(g["produce_msgs_s"] >= r["produce_msgs_s"])])
        rows.append(["batched consume ≥ Redis Streams", f"{fmt(g['consume_msgs_s'], 'rate')} vs "
                     f"{fmt(r['consume_msgs_s'], 'rate')} msg/s", ok(g["consume_msgs_s"] >= r["consume_msgs_s"])])
    if g and n and "error" not in g and "error" not in n:
        rows.append(["batched produce ≥ 2× JetStream", f"{fmt(g['produce_msgs_s'], 'rate')} vs 2 × "
                     f"{fmt(n['produce_msgs_s'], 'rate')} msg/s", ok(g["produce_msgs_s"] >= 2 * n["produce_msgs_s"])])
        rows.append(["batched consume ≥ 2× JetStream", f"{fmt(g['consume_msgs_s'], 'rate')} vs 2 × "
                     f"{fmt(n['consume_msgs_s'], 'rate')} msg/s", ok(g["consume_msgs_s"] >= 2 * n["consume_msgs_s"])])
    for mode in ("single", "batch"):
        a, s = t(f"graymq/async/{mode}"), t(f"graymq/sync/{mode}")
        if a and s and "error" not in a and "error" not in s:
            share = s["produce_msgs_s"] / a["produce_msgs_s"]
            rows.append([f"sync flush ≥ 50 % of async ({mode} produce)", f"{share:.0%}", ok(share >= 0.5)])
    redis_lat = results.median("latency", "redis")
    for case in ("graymq", "graymq auto_batch=False"):
        lat = results.median("latency", case)
        if not lat:
            continue
        if "error" in lat:
            rows.append([f"p99 ≤ 2 ms at the fixed rate ({case})", lat["error"][:80], "not met"])
            continue
        rows.append([f"p99 ≤ 2 ms at the fixed rate ({case})",
                     f"{fmt(lat['p99_ms'])} ms at {fmt(lat['rate_msgs_s'], 'rate')} msg/s",
                     ok(lat["p99_ms"] <= 2.0 and not lat.get("send_errors"))])
        if redis_lat and "error" not in redis_lat:
            rows.append([f"then Redis's p99 ({case})", f"{fmt(lat['p99_ms'])} vs {fmt(redis_lat['p99_ms'])} ms",
                         ok(lat["p99_ms"] <= redis_lat["p99_ms"])])
    promote = results.median("gray", "promote")
    if promote and "error" not in promote:
        rows.append(["promote done < 1 s after the last gray message consumed",
                     f"{fmt(promote['last_gray_to_rebalanced_s'])} s", ok(promote["last_gray_to_rebalanced_s"] < 1.0)])
    return rows


def before_after(results: Results, baseline: dict[str, Any]) -> list[str]:
    rows = []
    before_parts = baseline.get("parts", {})
    cpu = ["produce_broker_cpu_us", "produce_client_cpu_us", "consume_client_cpu_us"]
    rates = ["produce_msgs_s", "consume_msgs_s"]
    keys = {"throughput": [*rates, *cpu], "broker": [*rates, *cpu],
            "latency": ["rate_msgs_s", "p50_ms", "p99_ms", "producer_cpu_us", "server_cpu_us"], "store": ["msgs_s"],
            "gray": ["last_gray_to_rebalanced_s", "drain_msgs_s", "converge_after_start_s"]}
    for part, figure_keys in keys.items():
        for case, entry in results.parts.get(part, {}).items():
            if part in ("throughput", "latency") and not case.startswith("graymq"):
                continue
            before = before_parts.get(part, {}).get(case, {}).get("median")
            after = entry["median"]
            if not before or "error" in after:
                continue
            for key in figure_keys:
                if key in after and key in before and isinstance(before[key], int | float):
                    kind = "rate" if key.endswith("msgs_s") else ""
                    change = after[key] / before[key] if before[key] else math.nan
                    rows.append([f"{part}: {case}", key, fmt(before[key], kind), fmt(after[key], kind),
                                 fmt(change, "ratio")])
    if not rows:
        return []
    return [f"### Before / after the optimisations (before: {baseline.get('label', 'baseline')}, "
            f"commit {baseline.get('machine', {}).get('graymq_commit', '?')})", "",
            table(["case", "figure", "before", "after", "after / before"], rows), "",
            "`*_cpu_us`: CPU microseconds per message of the broker (server) or the client process — the figure "
            "least moved by other work on the machine.", ""]


def render(results: Results, meta: dict[str, Any], baseline: dict[str, Any] | None) -> str:
    """RESULTS.md: the machine and settings, every part's tables, the targets and the before / after."""
    out = [*render_header(meta), "## Results", "", *render_results(results, meta)]
    goal_rows = targets(results)
    if goal_rows:
        out += ["## Targets of issue 9", "", table(["target", "figures (medians)", "status"], goal_rows), ""]
    if baseline:
        out += render_baseline(results, meta, baseline)
    return "\n".join(out)


def render_header(meta: dict[str, Any]) -> list[str]:
    m = meta["machine"]
    s = meta["settings"]
    return [
        "# graymq benchmark results", "",
        f"Generated by `python -m graymq.bench {' '.join(meta['parts'])}` on {meta['started']} "
        f"({meta['duration_s']:.0f} s). Regenerate with `make bench` or `python -m graymq.bench [PART ...]`.", "",
        "## Machine", "",
        table(["", ""], [
            ["CPU", f"{m['cpu_model']}, {m['cores']} cores, {m['memory_gib']} GiB"],
            ["Python", f"{m['implementation']} {m['python']} (protobuf backend {m['protobuf_backend']})"],
            ["kernel", m["kernel"]],
            ["load average (1/5/15 min) at start", " / ".join(f"{x:.2f}" for x in m["load_average"])],
            ["load average at end", " / ".join(f"{x:.2f}" for x in meta["load_average_end"])],
            ["peers", f"{meta['versions']['redis']}; {meta['versions']['nats']}; redis-py "
                      f"{meta['versions']['redis-py']}, nats-py {meta['versions']['nats-py']}"],
            ["graymq commit", m["graymq_commit"]],
        ]), "",
        "Every figure is noisy (other work on the machine, the benchmark's own processes sharing its cores): "
        "each case "
        f"ran {s['repeat']} times, interleaved with the other cases, and the tables show the **median**. "
        "Compare figures of one run with each other rather than across runs.", "",
        "## Settings", "",
        f"- messages: {BODY_SIZE} B bodies; throughput: {s['count']:,} messages per case, produced then consumed;",
        f"- single = one message per request, {SINGLE_IN_FLIGHT} sends outstanding; auto = the same sends through "
        "graymq's default producer (`auto_batch`: the sends of one loop turn leave as one request); batch = "
        f"{BATCH} messages per request, {BATCH_IN_FLIGHT} outstanding; consumers read {BATCH} at a time;",
        "- consume rate: from the first message received to the last (consumer start-up excluded);",
        "- flush: graymq `async` (200 ms flush interval) vs Redis AOF `everysec` vs JetStream file storage; "
        "graymq `sync` (group commit, ack after fsync) vs Redis AOF `always`; nats-server 2.9 has no "
        "fsync-per-write setting;",
        f"- latency: {s['rate']:,.0f} msg/s for {s['duration']:g} s after a 1 s warm-up, producer and consumer "
        "in two processes, send time (CLOCK_MONOTONIC) in the payload, each message sent as soon as it is due "
        "without waiting for earlier acks (graymq's default producer: the messages due at a tick in one request, "
        "as with `auto_batch=False` one each; Redis: the messages due at a tick in one pipeline);",
        f"- gray: backlog of {s['gray_backlog']:,} gray messages; {s['consumers']} consumers; name server on "
        "PostgreSQL.", "",
    ]


def render_results(results: Results, meta: dict[str, Any]) -> list[str]:
    from graymq.bench import peers_report

    body = peers_report.render(results, table, meta)
    from graymq.bench import bench_awaited

    body += bench_awaited.render({case: e["median"] for case, e in results.parts.get("awaited", {}).items()}, table,
                                 fmt, meta.get("awaited_echo_rtt_us"))
    body += render_throughput(results, "throughput", "Throughput: graymq (client library) vs Redis Streams vs "
                                                     "NATS JetStream")
    ratios = ratio_rows(results)
    if ratios:
        body += ["### Ratios graymq / peer (above 1: graymq is faster)", "",
                 table(["flush/mode", "ratio", "produce", "consume"], ratios), ""]
    body += render_latency(results)
    body += render_figures(results, "gray", "Gray release", {
        "last_gray_to_rebalanced_s": "last gray message consumed → every consumer rebalanced (s)",
        "promote_end_to_rebalanced_s": "promote returned → every consumer rebalanced (s)",
        "promote_s": "promote, whole (s)", "drain_msgs_s": "drain rate (msg/s)",
        "converge_after_start_s": "converged after all started (s)",
        "weight_to_50_rebalanced_s": "weight 0 → 50 % set → every consumer holding its queues (s)",
        "weight_to_0_rebalanced_s": "weight 50 → 0 % set → every consumer holding its queues (s)",
        "failed_check_to_retired_s": "rollout check failed → gray consumers retired, holding nothing (s)",
        "failed_check_to_rolled_back_s": "rollout check failed → rollback complete, gray backlog 0 (s)"})
    body += render_figures(results, "nameserver", "Name server on PostgreSQL (200 clients in the group)")
    from graymq.bench.bench_fleet import LABELS, TITLE

    body += render_figures(results, "fleet", TITLE, LABELS)
    body += render_figures(results, "replication", "Replication: one broker against a broker set of two replicas", {
        "batched_msgs_s": "batched produce (msg/s)", "awaited_msgs_s": "awaited single sends (msg/s)",
        "awaited_p50_ms": "awaited send p50 (ms)", "awaited_p99_ms": "awaited send p99 (ms)"})
    body += render_figures(results, "tracing", "Tracing: OpenTelemetry off (API installed, no provider) and on", {
        "hooks_us_per_msg": "span hooks, one send and one delivery (µs/msg, no network)",
        "awaited_sends_per_s": "awaited single sends (msg/s)", "send_us": "awaited send (µs)"})
    body += render_figures(results, "stocksdk", "Stock RocketMQ 5 Python SDK (gRPC endpoint) beside graymq's client", {
        "send_msgs_s": "awaited single sends (msg/s)", "send_async_msgs_s": "SDK send_async, 64 outstanding (msg/s)",
        "consume_msgs_s": "PushConsumer, pulls of 64 (msg/s)",
        "receive_ack_msgs_s": "SimpleConsumer receive 32 + ack each (msg/s)"})
    body += render_figures(results, "lanes", "Lanes: a group of 200 with base + gray against base + 3 lanes", {
        "rebalance_us_per_consumer": "rebalance, one consumer's share (µs)",
        "rebalance_group_ms": "rebalance, the whole group's CPU (ms)",
        "send_base_us": "send path, a base message's side and queue (µs)",
        "send_lane_us": "send path, a gray / lane message's side and queue (µs)"})
    from graymq.bench import bench_profile

    body += bench_profile.render_section({case: e["median"] for case, e in results.parts.get("profile", {}).items()},
                                         table)
    from graymq.bench import bench_spark

    body += bench_spark.render({case: e["median"] for case, e in results.parts.get("spark", {}).items()},
                               bench_spark.Settings(**meta.get("spark_settings", {})), table, fmt,
                               meta.get("spark_skipped"))
    body += render_throughput(results, "broker", "Broker with the raw BrokerClient (no name server, no routing)")
    body += render_trust(results)
    if results.parts.get("store"):
        rows = [[case, fmt(e["median"]["msgs_s"], "rate"), fmt(e["median"]["mib_s"])]
                for case, e in results.parts["store"].items()]
        body += ["### Message store, in-process", "", table(["case", "msg/s", "MiB/s"], rows), ""]
    return body


def render_baseline(results: Results, meta: dict[str, Any], baseline: dict[str, Any]) -> list[str]:
    theirs = baseline.get("machine", {})
    if theirs.get("cpu_model") == meta["machine"].get("cpu_model"):
        return before_after(results, baseline)
    # a before / after across machines would credit the code with the hardware's difference
    return [f"The baseline (`bench/baseline.json`, commit {theirs.get('graymq_commit', '?')}) was taken on "
            f"another machine ({theirs.get('cpu_model')}): no before / after table against it.", ""]


def load_baseline(args: argparse.Namespace) -> dict[str, Any] | None:
    if args.baseline and args.baseline.exists() and args.baseline.resolve() != args.json.resolve():
        return dict(json.loads(args.baseline.read_text()))
    return None


def render_saved(args: argparse.Namespace) -> int:
    saved = json.loads(args.json.read_text())
    results = Results()
    results.parts = saved["parts"]
    meta = {**saved, "parts": saved.get("parts_run", list(saved["parts"]))}
    meta["charts"] = render_charts(results, args)
    text = render(results, meta, load_baseline(args))
    print(text)
    args.markdown.write_text(text + "\n\n## Notes\n\n" + keep_notes(args.markdown))
    return 0


def render_charts(results: Results, args: argparse.Namespace) -> list[tuple[str, str]]:
    """PNG charts next to RESULTS.md; none (and a note on stderr) without matplotlib."""
    try:
        from graymq.bench import charts
    except ImportError:
        progress("no charts: matplotlib is not installed (pip install 'graymq[bench]')")
        return []
    try:
        return charts.render_all(results, args.markdown.resolve().parent)
    except ImportError:
        progress("no charts: matplotlib is not installed (pip install 'graymq[bench]')")
        return []


def keep_notes(path: Path) -> str:
    if not path.exists():
        return f"{NOTES_START}\n{NOTES_END}\n"
    text = path.read_text()
    if NOTES_START in text and NOTES_END in text:
        return text[text.index(NOTES_START): text.index(NOTES_END) + len(NOTES_END)] + "\n"
    return f"{NOTES_START}\n{NOTES_END}\n"


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    def pkg(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    from graymq.bench.common import _sbin

    return {"redis": tool_version([_sbin("redis-server") or "redis-server", "--version"]),
            "nats": tool_version([_sbin("nats-server") or "nats-server", "--version"]),
            "redis-py": pkg("redis"), "nats-py": pkg("nats-py")}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m graymq.bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return parser


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``python -m graymq.bench``; ``graymq bench`` registers the same ones."""
    parser.add_argument("parts", nargs="*", metavar="PART",
                        help=f"parts to run (default: all): {', '.join(PARTS)}")
    parser.add_argument("--count", type=int, default=30_000, help="messages per throughput case (default 30000)")
    parser.add_argument("--store-count", type=int, default=50_000, help="messages per store case (default 50000)")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each case; the median is reported (default 2)")
    parser.add_argument("--rate", type=float, default=5000, help="latency: messages per second (default 5000)")
    parser.add_argument("--duration", type=float, default=10, help="latency: seconds (default 10)")
    parser.add_argument("--gray-backlog", type=int, default=100_000, help="gray backlog to drain (default 100000)")
    parser.add_argument("--consumers", type=int, default=50, help="consumers in the rebalance case (default 50)")
    parser.add_argument("--ns-calls", type=int, default=300, help="name server: timed calls per operation")
    parser.add_argument("--peer-count", type=int, default=200_000,
                        help="peers: messages of the batched produce and consume phases (default 200000)")
    parser.add_argument("--awaited-count", type=int, default=20_000,
                        help="peers: sends of the awaited single-send phase (default 20000)")
    parser.add_argument("--e2e-duration", type=float, default=10,
                        help="peers: seconds of the 5,000 msg/s e2e with awaited sends (default 10)")
    parser.add_argument("--group-sizes", type=lambda text: [int(n) for n in text.split(",")], default=[50, 200, 500],
                        help="groupscale: group sizes, comma-separated (default 50,200,500)")
    parser.add_argument("--fleet-clients", type=int, default=5000, help="fleet: clients (default 5000)")
    parser.add_argument("--fleet-processes", type=int, default=20, help="fleet: worker processes (default 20)")
    parser.add_argument("--spark-count", type=int, default=20_000,
                        help="spark: rows read by the source and written by the sink per round (default 20000)")
    parser.add_argument("--json", type=Path, default=HERE / "results.json", help="where to write the JSON")
    parser.add_argument("--markdown", type=Path, default=HERE / "RESULTS.md", help="where to write RESULTS.md")
    parser.add_argument("--baseline", type=Path, default=HERE / "baseline.json",
                        help="earlier results JSON to show before/after against (default bench/baseline.json)")
    parser.add_argument("--label", default="", help="a label stored in the JSON (e.g. 'before')")
    parser.add_argument("--no-install", action="store_true", help="do not apt-get install missing peers")
    parser.add_argument("--only-graymq", action="store_true", help="skip Redis and NATS (e.g. a before/after run)")
    parser.add_argument("--render-only", action="store_true",
                        help="run nothing: render RESULTS.md (and the tables) from the JSON given by --json")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    unknown = [p for p in args.parts if p not in PARTS]
    if unknown:
        parser.error(f"unknown part(s) {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    return run(args)


def run(args: argparse.Namespace) -> int:
    """Run the parts named in ``args`` (all when none), print the tables, write JSON and Markdown."""
    if args.render_only:
        return render_saved(args)
    parts = [p for p in PARTS if p in args.parts] if args.parts else list(PARTS)
    if not args.no_install:
        from graymq.bench.common import ensure_debian_packages

        needed = {}
        if {"peers", "awaited", "throughput", "latency"} & set(parts):
            needed.update({"redis-server": "redis-server", "nats-server": "nats-server"})
        if {"gray", "nameserver", "fleet"} & set(parts):
            needed["/usr/lib/postgresql/*/bin/initdb"] = "postgresql"
        ensure_debian_packages(needed)
    meta: dict[str, Any] = {"machine": machine_info(), "versions": versions(), "parts": parts, "label": args.label,
                            "started": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                            "settings": {k: getattr(args, k) for k in (
                                "count", "store_count", "repeat", "rate", "duration", "gray_backlog", "consumers",
                                "peer_count", "awaited_count", "e2e_duration", "group_sizes", "spark_count",
                                "fleet_clients", "fleet_processes")}}
    args.meta = meta  # parts add run-wide figures (the peers' echo round trip and load)
    began = time.monotonic()
    results = Results()
    with tempfile.TemporaryDirectory(prefix="graymq-bench-") as tmp:
        root = Path(tmp)
        with contextlib.ExitStack() as stack:
            postgres = stack.enter_context(postgres_server()) if {"gray", "nameserver", "fleet"} & set(parts) else None
            for part in parts:
                if part in ("gray", "nameserver", "fleet"):
                    globals()[f"part_{part}"](results, args, root, postgres)
                else:
                    globals()[f"part_{part}"](results, args, root)
    meta["duration_s"] = time.monotonic() - began
    meta["load_average_end"] = list(os.getloadavg())
    meta["charts"] = render_charts(results, args)
    text = render(results, meta, load_baseline(args))
    print(text)
    args.json.write_text(json.dumps({**meta, "parts": results.parts, "parts_run": parts}, indent=1, default=str))
    args.markdown.write_text(text + "\n\n## Notes\n\n" + keep_notes(args.markdown))
    progress(f"wrote {args.json} and {args.markdown} ({meta['duration_s']:.0f} s)")
    return 0
