"""Shared pieces of the benchmarks: payloads with a send time, percentiles, pacing, server processes,
peak RSS, machine info and the Debian packages the peers need.

Every workload in ``bench/`` returns a flat ``dict[str, float | str]`` of figures; the runner
(``bench/runner.py``) repeats it, keeps the median of each figure and renders the tables.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import math
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Self

MIB = 1024 * 1024
BODY_SIZE = 1024  # every workload sends 1 KiB messages
BATCH = 64  # messages per batched request, per pull/fetch/XREADGROUP, per consumer batch
SINGLE_IN_FLIGHT = 64  # single sends: one message per request, this many requests outstanding
BATCH_IN_FLIGHT = 4  # batched sends: this many batches outstanding
_FILLER = bytes(range(256)) * (BODY_SIZE // 256)

Figures = dict[str, Any]


# ---------------------------------------------------------------- payloads and statistics

def payload(seq: int = 0) -> bytes:
    """A 1 KiB body whose first 8 bytes are the send time (``time.monotonic_ns``) and next 8 a sequence number.

    ``CLOCK_MONOTONIC`` is one clock for every process of the machine, so a consumer in another
    process may subtract it too.
    """
    return time.monotonic_ns().to_bytes(8, "big") + seq.to_bytes(8, "big") + _FILLER[16:]


def sent_at_ns(body: bytes | memoryview) -> int:
    return int.from_bytes(body[:8], "big")


def percentile(samples: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of ``samples`` (0 < q <= 1); NaN when there are none."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def latency_figures(latencies_ms: Sequence[float], sent: int, seconds: float) -> Figures:
    return {
        "sent": sent, "received": len(latencies_ms), "rate_msgs_s": sent / seconds if seconds else math.nan,
        "p50_ms": percentile(latencies_ms, 0.50), "p99_ms": percentile(latencies_ms, 0.99),
        "max_ms": max(latencies_ms) if latencies_ms else math.nan,
    }


def rate_figures(prefix: str, count: int, seconds: float) -> Figures:
    rate = count / seconds
    return {f"{prefix}_msgs_s": rate, f"{prefix}_mib_s": rate * BODY_SIZE / MIB}


async def produce_consume_figures(server: Server, count: int, produce: Callable[[], Awaitable[float]],
                                  consume: Callable[[], Awaitable[float]]) -> Figures:
    """Run ``produce`` then ``consume`` (each returns its seconds for ``count`` messages): their rates, the
    server's peak RSS, and the CPU microseconds per message of the server and of this process in each."""
    cpu = [server.cpu_seconds(), time.process_time()]
    produce_s = await produce()
    cpu += [server.cpu_seconds(), time.process_time()]
    consume_s = await consume()
    cpu += [server.cpu_seconds(), time.process_time()]
    per_msg = [(cpu[i + 2] - cpu[i]) / count * 1e6 for i in range(4)]
    return {**rate_figures("produce", count, produce_s), **rate_figures("consume", count, consume_s),
            "broker_peak_rss_mib": server.peak_rss_mib(),
            "produce_broker_cpu_us": per_msg[0], "produce_client_cpu_us": per_msg[1],
            "consume_broker_cpu_us": per_msg[2], "consume_client_cpu_us": per_msg[3]}


async def paced(rate: float, count: int, send: Callable[[int, int], None], tick_s: float = 0.001) -> int:
    """Send ``count`` messages at ``rate`` a second: the loop wakes up every ``tick_s`` (1 ms) and calls
    ``send(first_seq, n)`` for the ``n`` messages due by then (a system may pipeline them; the send
    time in each payload is the actual one). Returns how many were sent."""
    start = time.monotonic()
    seq = 0
    while seq < count:
        due = min(count, int((time.monotonic() - start) * rate) + 1)
        if due > seq:
            send(seq, due - seq)
            seq = due
        next_at = start + seq / rate
        await asyncio.sleep(max(tick_s, next_at - time.monotonic()))
    return seq


async def paced_awaited(rate: float, count: int, send: Callable[[int], Any]) -> int:
    """Send ``count`` messages at ``rate`` a second, each awaited before the next (a synchronous client's
    ``send(seq)`` simply returns): a message leaves when it is due and the previous one is acknowledged, so a
    system slower than ``rate`` shows it in the rate reached. Returns how many sends succeeded."""
    start = time.monotonic()
    acked = 0
    for seq in range(count):
        delay = start + seq / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        try:
            result = send(seq)
            if inspect.isawaitable(result):
                await result
        except Exception:  # noqa: BLE001 - counted as a send error by the harness
            continue
        acked += 1
    return acked


async def timed_phases(server: Server, phases: Sequence[tuple[str, int, Callable[[], Any]]]) -> Figures:
    """Run each ``(name, count, fn)`` in turn (``fn()`` returns, or is awaited for, its seconds for ``count``
    messages): ``<name>_msgs_s`` and the CPU µs per message of the server and of this process in it."""
    figures: Figures = {}
    for name, count, fn in phases:
        server_cpu, client_cpu = server.cpu_seconds(), time.process_time()
        seconds = fn()
        if inspect.isawaitable(seconds):
            seconds = await seconds
        figures[f"{name}_msgs_s"] = count / seconds
        figures[f"{name}_server_cpu_us"] = (server.cpu_seconds() - server_cpu) / count * 1e6
        figures[f"{name}_client_cpu_us"] = (time.process_time() - client_cpu) / count * 1e6
    figures["broker_peak_rss_mib"] = server.peak_rss_mib()
    return figures


async def run_windowed(count: int, per_call: int, in_flight: int, call: Callable[[int, int], Awaitable[None]]) -> None:
    """Issue ``call(first_seq, n)`` for consecutive chunks of ``per_call`` messages, ``in_flight`` at a time."""
    next_seq = 0

    async def worker() -> None:
        nonlocal next_seq
        while next_seq < count:
            first = next_seq
            n = min(per_call, count - first)
            next_seq += n
            await call(first, n)

    await asyncio.gather(*(worker() for _ in range(in_flight)))


async def timed_produce(count: int, batched: bool, single: Callable[[int, int], Awaitable[None]],
                        batch: Callable[[int, int], Awaitable[None]]) -> float:
    """Seconds to send ``count`` messages, one per call or in batches of ``BATCH``, with the usual windows."""
    began = time.perf_counter()
    if batched:
        await run_windowed(count, BATCH, BATCH_IN_FLIGHT, batch)
    else:
        await run_windowed(count, 1, SINGLE_IN_FLIGHT, single)
    return time.perf_counter() - began


async def wait_until(predicate: Callable[[], bool], timeout_s: float, what: str, interval_s: float = 0.005) -> float:
    """Poll ``predicate`` until true; returns the monotonic time it became true."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:g}s waiting for {what}")
        await asyncio.sleep(interval_s)
    return time.monotonic()


# ---------------------------------------------------------------- processes

def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def peak_rss_mib(pid: int) -> float:
    """VmHWM of ``pid`` (peak resident set) in MiB; NaN when unreadable."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return math.nan


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds consumed so far by ``pid`` (its threads included); NaN when unreadable.

    CPU per message is the figure to optimise on a shared machine: unlike a rate, it hardly moves
    when other work competes for the cores.
    """
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return math.nan
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Server:
    """A server subprocess started by a benchmark, output kept in a log file, stopped with SIGTERM.

    ``ready_prefix``: a stdout line starting with it means ready (its remainder is kept in
    ``ready_line``); otherwise ``port`` accepting TCP connections means ready.
    """

    def __init__(self, name: str, args: Sequence[str], log_dir: Path, *, env: dict[str, str] | None = None,
                 port: int | None = None, ready_prefix: str | None = None, cwd: Path | None = None) -> None:
        self.name = name
        self.port = port
        self.ready_line = ""
        self.log_path = log_dir / f"{name}.log"
        self._ready_prefix = ready_prefix
        self._ready = threading.Event()
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            list(args), stdout=subprocess.PIPE if ready_prefix else self._log, stderr=self._log,
            stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})}, cwd=str(cwd) if cwd else None,
            text=True, bufsize=1,
        )
        if ready_prefix:
            threading.Thread(target=self._relay, daemon=True).start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _relay(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if self._ready_prefix and line.startswith(self._ready_prefix) and not self._ready.is_set():
                self.ready_line = line[len(self._ready_prefix):].strip()
                self._ready.set()
            self._log.write(line)
            self._log.flush()
        self._ready.set()

    def wait_ready(self, timeout_s: float = 60.0) -> Self:
        deadline = time.monotonic() + timeout_s
        if self._ready_prefix:
            self._ready.wait(timeout_s)
            if not self.ready_line:
                self.stop()
                raise RuntimeError(f"{self.name} did not start; log: {self.log_path}\n{self._tail()}")
            return self
        assert self.port is not None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{self.name} not listening on {self.port}; log: {self.log_path}\n{self._tail()}")

    def _tail(self) -> str:
        self._log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-20:])

    def peak_rss_mib(self) -> float:
        return peak_rss_mib(self.pid)

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def stop(self, timeout_s: float = 20.0) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def graymq_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "graymq.gray_controller.cli", *args]


@contextlib.contextmanager
def quiet_logs() -> Iterator[None]:
    """In-process clients log at WARNING during a benchmark (rebalance chatter is not a figure)."""
    import logging

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.WARNING)
    try:
        yield
    finally:
        root.setLevel(level)


# ---------------------------------------------------------------- system packages

def ensure_debian_packages(binaries: dict[str, str]) -> None:
    """Install the Debian package of every missing binary (``{binary or absolute glob: package}``) with
    apt-get. Like the Makefile does for PostgreSQL: only when missing, with sudo when not root.
    """
    import glob

    def present(binary: str) -> bool:
        if binary.startswith("/"):
            return any(os.access(p, os.X_OK) for p in glob.glob(binary))
        return bool(shutil.which(binary) or _sbin(binary))

    missing = sorted({pkg for binary, pkg in binaries.items() if not present(binary)})
    if not missing:
        return
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    print(f"bench: installing Debian packages {' '.join(missing)} (missing binaries)", file=sys.stderr, flush=True)
    subprocess.run([*sudo, "apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run([*sudo, "apt-get", "install", "-y", "-qq", *missing], check=True, env=env,
                   stdout=subprocess.DEVNULL)


def _sbin(binary: str) -> str | None:
    for directory in ("/usr/sbin", "/usr/bin", "/sbin"):
        path = os.path.join(directory, binary)
        if os.access(path, os.X_OK):
            return path
    return None


def binary_path(binary: str) -> str:
    path = shutil.which(binary) or _sbin(binary)
    if path is None:
        raise RuntimeError(f"{binary} not found")
    return path


def tool_version(args: Sequence[str]) -> str:
    try:
        out = subprocess.run(list(args), capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unavailable"
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr).strip() else "unknown"


# ---------------------------------------------------------------- machine

def machine_info() -> dict[str, Any]:
    model = "unknown"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem_gib = math.nan
    with contextlib.suppress(OSError, ValueError), open("/proc/meminfo") as meminfo:
        mem_gib = int(meminfo.readline().split()[1]) / 1024 / 1024
    commit = "unknown"
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).resolve().parents[1], timeout=5).stdout.strip() or "unknown"
    from google.protobuf.internal import api_implementation

    return {
        "cpu_model": model, "cores": os.cpu_count(), "memory_gib": round(mem_gib, 1),
        "python": platform.python_version(), "implementation": platform.python_implementation(),
        "protobuf_backend": api_implementation.Type(), "kernel": platform.release(),
        "load_average": list(os.getloadavg()), "graymq_commit": commit,
    }


@contextlib.contextmanager
def worker_processes(procs: list[Any], commands: list[Any], join_s: float) -> Iterator[None]:
    """Start ``procs``; on leaving, send each its end (``None`` on its command queue) and wait ``join_s`` for it,
    then kill it."""
    for proc in procs:
        proc.start()
    try:
        yield
    finally:
        for queue in commands:
            queue.put(None)
        for proc in procs:
            proc.join(join_s)
            if proc.is_alive():
                proc.kill()
                proc.join()


def consumers_mark(consumers: dict[str, Any]) -> tuple[Any, ...]:
    """A cheap mark of what each of ``consumers`` (push consumers by client id) holds and sees: its lane, switch and
    queues in the order it took them; equal marks, equal status."""
    return tuple((cid, c.lane, c.gray_switch, tuple(c.assignment.queues)) for cid, c in consumers.items())


async def serve_group_commands(status: Callable[[], str], status_path: str, commands: Any,
                               join: Callable[[str], Awaitable[Any]], leave: Callable[[str], Awaitable[Any]],
                               poll_s: float = 0.01, mark: Callable[[], object] | None = None) -> None:
    """A bench worker's loop: write ``status()`` to ``status_path`` (atomically) whenever it changes (looked at
    every ``poll_s``; with ``mark``, built only when the mark changed: building a status, its queues sorted and
    JSON, a hundred times a second in each of a fleet's twenty workers took a third of the CPU they had at steady
    state), and act on the ``("join" | "leave", client id)`` commands of the ``commands`` queue until it gives
    ``None``. One thread waits on the queue and hands each command to the loop: asking the queue from the loop
    every ``poll_s`` (a thread-pool hop each time) was most of an idle fleet worker's CPU."""
    written, marked = "", object()
    loop = asyncio.get_running_loop()
    received: asyncio.Queue[Any] = asyncio.Queue()

    def forward() -> None:
        while True:
            command = commands.get()
            loop.call_soon_threadsafe(received.put_nowait, command)
            if command is None:
                return

    threading.Thread(target=forward, name="bench commands", daemon=True).start()
    while True:
        latest = mark() if mark is not None else object()  # no mark: always a new one
        if latest != marked:
            marked = latest
            if (now := status()) != written:
                Path(status_path + ".tmp").write_text(now)
                os.replace(status_path + ".tmp", status_path)
                written = now
        try:
            command = received.get_nowait()
        except asyncio.QueueEmpty:
            await asyncio.sleep(poll_s)
            continue
        if command is None:
            return
        action, client_id = command
        await (join if action == "join" else leave)(client_id)
