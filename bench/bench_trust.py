"""What authentication and TLS cost on the broker path: produce then consume N 1 KiB messages with the raw
``BrokerClient``, single sends and batches (as ``bench_broker.py``), in three configurations in one run:

- ``dev``: a broker in dev mode over plain TCP; the client sends no token, every request acts as ``dev``;
- ``auth``: authentication on; the client authenticates with a principal's token (produce ``Bench*``, consume
  ``bench_*:Bench*``) and the broker checks every request against those rights;
- ``auth+tls``: the same over TLS, with a throwaway CA and a server certificate for 127.0.0.1 (``devkit/certs.py``).

    .venv/bin/python -m graymq.bench.bench_trust [--count N] [--mode single,batch]

Every broker registers with one name server (SQLite, authentication on) with a broker token and learns the
principals and the topic from it before it reports ready; each case runs on a fresh broker and store, flush
async. A configuration's cost is how much lower its rate is than ``dev``'s, and how much more CPU (broker plus
client) a message takes, in percent.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import math
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from graymq.bench.bench_broker import QUEUES, TOPIC, measure
from graymq.bench.common import Figures
from graymq.bench.graymq_servers import Broker, NameServer
from graymq.devkit.certs import TlsFiles, make_tls_files
from graymq.protocol.broker_client import BrokerClient
from graymq.protocol.tls import client_context

CONFIGS = ("dev", "auth", "auth+tls")
MODES = ("single", "batch")
CASES = [(config, mode) for mode in MODES for config in CONFIGS]  # the configurations of a mode side by side
PRODUCE_RIGHTS = ["Bench*"]
CONSUME_RIGHTS = ["bench_*:Bench*"]
_broker_names = itertools.count()


@dataclass(frozen=True)
class TrustSetup:
    """The name server every case's broker registers with, the two principals' tokens and the TLS files."""

    nameserver: NameServer
    broker_token: str
    client_token: str
    tls: TlsFiles


@contextlib.contextmanager
def trust_setup(root: Path, log_dir: Path) -> Iterator[TrustSetup]:
    """A name server with authentication on, the topic, a broker principal and a client principal."""
    with NameServer(root / "ns-trust", log_dir, secure=True).wait_ready() as ns:
        broker_token, client_token = asyncio.run(_principals_and_topic(ns))
        yield TrustSetup(ns, broker_token, client_token, make_tls_files(root / "tls"))


async def _principals_and_topic(ns: NameServer) -> tuple[str, str]:
    admin = ns.admin()
    try:
        await admin.put_topic(TOPIC, QUEUES, 0)
        broker = await admin.add_principal("bench-broker", [], [], admin=False, broker=True, broker_names=["trust*"])
        client = await admin.add_principal("bench-client", PRODUCE_RIGHTS, CONSUME_RIGHTS, admin=False, broker=False)
    finally:
        await admin.close()
    return broker.token, client.token


def start_broker(setup: TrustSetup, root: Path, log_dir: Path, config: str) -> Broker:
    """A fresh broker (store under ``root``) registered with the setup's name server, in ``config``."""
    if config not in CONFIGS:
        raise ValueError(f"unknown configuration {config!r}; choose from {', '.join(CONFIGS)}")
    name = f"trust{next(_broker_names)}"
    tls = (setup.tls.cert, setup.tls.key) if config == "auth+tls" else None
    return Broker(name, root / name, log_dir, nameserver=setup.nameserver.url, dev=config == "dev",
                  broker_token=setup.broker_token, tls=tls).wait_ready()


def client_for(setup: TrustSetup, config: str) -> BrokerClient:
    """The raw client of ``config``: no token in ``dev``, else the client principal's; TLS in ``auth+tls``."""
    return BrokerClient(timeout_s=30, token="" if config == "dev" else setup.client_token,
                        tls=client_context(setup.tls.ca) if config == "auth+tls" else False)


async def run_case(setup: TrustSetup, root: Path, log_dir: Path, config: str, batched: bool, count: int) -> Figures:
    """Produce then consume ``count`` messages on a fresh broker in ``config`` (one of ``CONFIGS``)."""
    broker = start_broker(setup, root, log_dir, config)
    try:
        return await measure(broker, client_for(setup, config), count, batched)
    finally:
        broker.stop()


def cost_pct(figures: Figures, dev: Figures) -> Figures:
    """Against ``dev``'s figures: how much lower the rates are, how much more CPU (broker + client) a message
    takes, in percent (negative: the case did better than ``dev``, i.e. noise)."""
    def cpu(f: Figures, phase: str) -> float:
        return float(f[f"{phase}_broker_cpu_us"] + f[f"{phase}_client_cpu_us"])

    out: Figures = {}
    for phase in ("produce", "consume"):
        rate, base = figures[f"{phase}_msgs_s"], dev[f"{phase}_msgs_s"]
        out[f"{phase}_cost_pct"] = (1 - rate / base) * 100 if base else math.nan
        used, base_used = cpu(figures, phase), cpu(dev, phase)
        out[f"{phase}_cpu_cost_pct"] = (used / base_used - 1) * 100 if base_used else math.nan
    return out


def run_all(count: int, modes: list[str], root: Path) -> dict[str, Figures]:
    results = {}
    with trust_setup(root, root) as setup:
        for config, mode in CASES:
            if mode in modes:
                results[f"{config}/{mode}"] = asyncio.run(run_case(setup, root, root, config, mode == "batch", count))
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=50_000)
    parser.add_argument("--mode", default="single,batch")
    args = parser.parse_args(argv)
    modes = args.mode.split(",")
    if unknown := [m for m in modes if m not in MODES]:
        parser.error(f"unknown mode(s) {', '.join(unknown)}; choose from {', '.join(MODES)}")
    with tempfile.TemporaryDirectory(prefix="graymq-bench-trust-") as tmp:
        results = run_all(args.count, modes, Path(tmp))
    print(f"{'case':<16} {'produce msg/s':>14} {'MiB/s':>7} {'cost':>7} {'consume msg/s':>14} {'MiB/s':>7} "
          f"{'cost':>7}   CPU us/msg: produce broker/client, consume broker/client; CPU cost produce/consume")
    for case, f in results.items():
        c = cost_pct(f, results[f"dev/{case.split('/')[1]}"])
        print(f"{case:<16} {f['produce_msgs_s']:>14,.0f} {f['produce_mib_s']:>7.1f} {c['produce_cost_pct']:>6.1f}% "
              f"{f['consume_msgs_s']:>14,.0f} {f['consume_mib_s']:>7.1f} {c['consume_cost_pct']:>6.1f}%   "
              f"{f['produce_broker_cpu_us']:6.1f} {f['produce_client_cpu_us']:6.1f} "
              f"{f['consume_broker_cpu_us']:6.1f} {f['consume_client_cpu_us']:6.1f}   "
              f"{c['produce_cpu_cost_pct']:+6.1f}% {c['consume_cpu_cost_pct']:+6.1f}%")


if __name__ == "__main__":
    main()
