"""``graymq up``: a local cluster — a name server on SQLite and one broker (with its gRPC endpoint for stock
RocketMQ 5 clients at 8081 unless told otherwise) — until Ctrl-C/SIGTERM."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from graymq.gray_controller.cli.common import READY_PREFIX, SERVER_LOG_HELP, HelpFormatter, parse_size, print_ready
from graymq.protocol.errors import GrayMQError

# A local cluster stays small on disk: files are preallocated, so these sizes are what the first messages cost.
UP_SEGMENT_SIZE = "64M"
UP_CQ_UNITS_PER_FILE = 50_000  # 1 MB consume-queue files (a broker's default is 6 MB)
UP_GRPC_PORT = 8081  # where the RocketMQ proxy serves stock RocketMQ 5 clients, so their usual endpoint works


def grpc_port(value: str) -> int | None:
    """``--grpc-port``: a port (0 = any free one), or ``off`` for no gRPC endpoint.

    >>> grpc_port("8081"), grpc_port("0"), grpc_port("off")
    (8081, 0, None)
    """
    if value.strip().lower() == "off":
        return None
    try:
        port = int(value)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port (0-65535) or 'off'")
    return port


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "up", help="run a local cluster: name server (SQLite) + one broker",
        description="Run a local cluster in dev mode (authentication off) until Ctrl-C or SIGTERM: a name "
                    "server on SQLite and one broker with small preallocated files (commit log segments of "
                    "--segment-size, 1 MB consume-queue files).",
        epilog=f"environment:\n{SERVER_LOG_HELP}\n"
               "  GRAYMQ_BROKER_*      further broker settings (e.g. GRAYMQ_BROKER_RETENTION_HOURS)",
        formatter_class=HelpFormatter,
    )
    p.add_argument("--data", type=Path, default=Path("./graymq-data"), help="data directory (default: ./graymq-data)")
    p.add_argument("--nameserver-port", type=int, default=9876, help="name server port, 0 = free port (default: 9876)")
    p.add_argument("--broker-port", type=int, default=10911, help="broker port, 0 = free port (default: 10911)")
    p.add_argument("--broker-name", default="broker-a", help="broker name (default: broker-a)")
    p.add_argument("--grpc-port", type=grpc_port, default=UP_GRPC_PORT, metavar="P|off",
                   help=f"the broker's gRPC endpoint for stock RocketMQ 5 clients, 0 = free port, off = none "
                        f"(default: {UP_GRPC_PORT}, the RocketMQ proxy's port)")
    p.add_argument("--segment-size", type=parse_size, default=UP_SEGMENT_SIZE, metavar="SIZE",
                   help=f"commit log segment size of a new store: bytes or 64M, 1G... (default: {UP_SEGMENT_SIZE})")
    p.set_defaults(handler=run)


class Child:
    """A ``graymq`` subprocess whose output is relayed with a prefix; ``ready`` holds its ready line."""

    def __init__(self, name: str, args: list[str], env: dict[str, str]) -> None:
        self.name = name
        self.ready: dict[str, Any] | None = None
        self._event = threading.Event()
        self.proc = subprocess.Popen([sys.executable, "-m", "graymq.gray_controller.cli", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        threading.Thread(target=self._relay, daemon=True).start()

    def _relay(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(READY_PREFIX) and self.ready is None:
                self.ready = json.loads(line[len(READY_PREFIX):])
                self._event.set()
                continue
            sys.stderr.write(f"[{self.name}] {line}")
        self._event.set()

    def wait_ready(self, timeout: float) -> dict[str, Any]:
        self._event.wait(timeout)
        if self.ready is None:
            try:
                code: int | None = self.proc.wait(5)  # its output ended: it is exiting
            except subprocess.TimeoutExpired:
                code = None
            raise GrayMQError(f"{self.name} did not start (exit code {code}); see its log above")
        return self.ready

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def _says_info() -> bool:
    """Whether ``GRAYMQ_LOG_LEVEL`` (default INFO) lets informational lines through."""
    return os.environ.get("GRAYMQ_LOG_LEVEL", "INFO").upper() in ("DEBUG", "INFO")


def _hint(ns_url: str, broker_name: str, broker_info: dict[str, Any]) -> str:
    """What a person needs to reach the cluster: the name server, the broker and, when on, the gRPC endpoint."""
    grpc = (f"\n  stock RocketMQ 5 clients (Java, Go, Python, Node.js, C#): endpoint {broker_info['grpc']}"
            if "grpc" in broker_info else "")
    return (f"graymq local cluster up: name server {ns_url}, broker {broker_name} at {broker_info['address']}{grpc}"
            f"\n  export GRAYMQ_NAMESERVER={ns_url}   (dev mode: authentication is off)")


def run(args: argparse.Namespace) -> int:
    data = args.data.resolve()
    data.mkdir(parents=True, exist_ok=True)
    env = {"GRAYMQ_BROKER_CQ_UNITS_PER_FILE": str(UP_CQ_UNITS_PER_FILE), **os.environ,
           "GRAYMQ_DEV_MODE": "true", "PYTHONUNBUFFERED": "1"}
    children: list[Child] = []
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        ns = Child("nameserver", ["nameserver", "--port", str(args.nameserver_port), "--db",
                                  f"sqlite:///{data / 'nameserver.db'}", "--migrate", "--dev"], env)
        children.append(ns)
        ns_url = ns.wait_ready(60)["url"]
        grpc = [] if args.grpc_port is None else ["--grpc-port", str(args.grpc_port)]
        broker = Child("broker", ["broker", "--name", args.broker_name, "--port", str(args.broker_port), "--store",
                                  str(data / args.broker_name), "--nameserver", ns_url,
                                  "--segment-size", str(args.segment_size), *grpc], env)
        children.append(broker)
        broker_info = broker.wait_ready(60)
        ready = {"kind": "cluster", "address": ns_url.removeprefix("http://"), "url": ns_url,
                 "nameserver": ns_url, "broker": broker_info["address"], "data": str(data)}
        if "grpc" in broker_info:
            ready["grpc"] = broker_info["grpc"]
        if _says_info():  # a script that owns the cluster (make demo) sets GRAYMQ_LOG_LEVEL=WARNING
            print(_hint(ns_url, args.broker_name, broker_info), file=sys.stderr, flush=True)
        print_ready(ready)  # last: whoever waits for it has the hint too
        while not stop.is_set():
            if any(c.proc.poll() is not None for c in children):
                raise GrayMQError("a cluster process exited; stopping the rest")
            stop.wait(0.5)
        return 0
    finally:
        for child in reversed(children):
            child.stop()
