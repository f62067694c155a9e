"""End-to-end latency at a fixed rate, the same harness for every system.

A consumer process and a producer process (spawned, so each has its own interpreter and core,
as a service's producer and consumer would) talk to the server under test. The producer sends
``rate`` messages a second for ``warmup_s + duration_s`` seconds, each sent as soon as it is due
without waiting for earlier acks, its send time (``CLOCK_MONOTONIC``, one clock for the whole
machine) in the first bytes of the payload. The consumer records ``receive time - send time``
for the messages of the timed part. The send time is the actual one, not the schedule's: when a
producer falls behind, its lag shows in the achieved rate, not in the latencies.

A system module provides ``async latency_consume(params, recorder, ready)`` (calls ``ready()``
once subscribed, returns once ``recorder.done`` is set) and ``async latency_produce(params, rate, count) -> int``
(how many messages were acknowledged; its sends go through ``InFlight``, or with ``params["awaited"]`` each
send is awaited before the next, ``paced_awaited``). ``params["uvloop"]``: both processes run on uvloop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import math
import multiprocessing as mp
import os
import queue
import time
from collections.abc import Iterator
from typing import Any

from graymq.bench.common import Figures, cpu_seconds, latency_figures, sent_at_ns
from graymq.protocol import loop

WARMUP_S = 1.0
DRAIN_TIMEOUT_S = 30.0
PRODUCER_GRACE_S = 60.0  # beyond the schedule, for the last acks
READY_TIMEOUT_S = 90.0  # for the consumer process to start and hold its queues


class Recorder:
    """Counts the messages with ``seq < expected`` (a warm-up message past the end is ignored) and keeps the
    latency (ms) of those with ``seq >= first_timed``."""

    def __init__(self, expected: int, first_timed: int) -> None:
        self.expected = expected
        self.first_timed = first_timed
        self.count = 0
        self.latencies_ms: list[float] = []
        self.done = asyncio.Event()

    def record(self, body: bytes | memoryview, now_ns: int | None = None) -> None:
        now_ns = now_ns or time.monotonic_ns()
        seq = int.from_bytes(body[8:16], "big")
        if seq >= self.expected:
            return
        if seq >= self.first_timed:
            self.latencies_ms.append((now_ns - sent_at_ns(body)) / 1e6)
        self.count += 1
        if self.count >= self.expected:
            self.done.set()


class InFlight:
    """The producer's sends, counted as they complete and dropped once done: a run that kept every future
    (and its result) until the end would make the producer's garbage collector scan them all, pausing it
    for tens of milliseconds — the tail of the latencies it measures."""

    def __init__(self) -> None:
        self.acked = 0
        self._pending: set[asyncio.Future[Any]] = set()

    def track(self, future: asyncio.Future[Any], messages: int = 1) -> None:
        self._pending.add(future)
        future.add_done_callback(functools.partial(self._done, messages))

    def _done(self, messages: int, future: asyncio.Future[Any]) -> None:
        self._pending.discard(future)
        if not future.cancelled() and future.exception() is None:
            self.acked += messages

    async def acked_when_done(self) -> int:
        """Wait for the sends still in flight; how many messages were acknowledged."""
        if self._pending:
            await asyncio.wait(list(self._pending))
        return self.acked


@contextlib.contextmanager
def _profiled(role: str) -> Iterator[None]:
    """With ``BENCH_PROFILE_DIR`` set, profile this process's CPU time (cProfile) into ``<dir>/<role>.pstats``."""
    directory = os.environ.get("BENCH_PROFILE_DIR")
    if not directory:
        yield
        return
    import cProfile

    profile = cProfile.Profile(time.process_time)
    profile.enable()
    try:
        yield
    finally:
        profile.disable()
        profile.dump_stats(os.path.join(directory, f"{role}.pstats"))


def _run(params: dict[str, Any], main: Any) -> Any:
    return loop.run(main) if params.get("uvloop") else asyncio.run(main)


def _consumer_main(module: str, params: dict[str, Any], expected: int, first_timed: int, ready: Any,
                   produced: Any, results: Any) -> None:
    system = importlib.import_module(module)

    async def run() -> list[float]:
        recorder = Recorder(expected, first_timed)
        consuming = asyncio.create_task(system.latency_consume(params, recorder, ready.set))
        deadline = time.monotonic() + params["timeout_s"]
        drain_deadline = math.inf
        while not consuming.done() and time.monotonic() < min(deadline, drain_deadline):
            await asyncio.sleep(0.05)
            if drain_deadline == math.inf and produced.is_set():
                drain_deadline = time.monotonic() + DRAIN_TIMEOUT_S
        if consuming.done():
            consuming.result()  # surface a consumer failure
        else:  # messages lost or very late: they show as ``lost``
            recorder.done.set()  # consumers return once done is set
            try:
                await asyncio.wait_for(consuming, 30)
            except TimeoutError:
                pass
        return recorder.latencies_ms

    try:
        cpu = time.process_time()
        with _profiled("consumer"):
            latencies = _run(params, run())
        results.put(("ok", (latencies, time.process_time() - cpu)))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises
        results.put(("error", f"{type(exc).__name__}: {exc}"))


def _producer_main(module: str, params: dict[str, Any], rate: float, count: int, results: Any) -> None:
    system = importlib.import_module(module)
    try:
        began, cpu = time.monotonic(), time.process_time()
        with _profiled("producer"):
            acked = _run(params, system.latency_produce(params, rate, count))
        results.put(("ok", (acked, time.monotonic() - began, time.process_time() - cpu)))
    except BaseException as exc:  # noqa: BLE001
        results.put(("error", f"{type(exc).__name__}: {exc}"))


def _wait_ready(module: str, consumer: Any, ready: Any, results: Any) -> None:
    """Until the consumer process says it is subscribed; its own error as soon as it fails or dies first (not a
    bare "not ready" once ``READY_TIMEOUT_S`` is over)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not ready.wait(0.2):
        if not consumer.is_alive() or not results.empty() or time.monotonic() > deadline:
            try:
                status, value = results.get(timeout=5)
            except queue.Empty:
                status, value = "error", (f"exited with code {consumer.exitcode}" if not consumer.is_alive()
                                          else f"not subscribed after {READY_TIMEOUT_S:g} s")
            raise RuntimeError(f"{module}: latency consumer not ready: {value if status == 'error' else status}")


def measure(module: str, params: dict[str, Any], rate: float, duration_s: float, server_pid: int | None = None
            ) -> Figures:
    """Run the consumer and producer processes of ``module`` against an already running server.

    ``latency_produce`` returns how many sends were acknowledged; the others count as send errors.
    CPU per message (µs) of producer, consumer and ``server_pid``: the whole run (warm-up included),
    not the interpreters' start-up.
    """
    ctx = mp.get_context("spawn")
    warmup = int(rate * WARMUP_S)
    count = warmup + int(rate * duration_s)
    params = {**params, "timeout_s": WARMUP_S + duration_s + 300}
    ready, produced = ctx.Event(), ctx.Event()
    consumer_results, producer_results = ctx.Queue(), ctx.Queue()
    consumer = ctx.Process(target=_consumer_main, name="latency-consumer",
                           args=(module, params, count, warmup, ready, produced, consumer_results))
    producer = ctx.Process(target=_producer_main, args=(module, params, rate, count, producer_results),
                           name="latency-producer")
    server_cpu = cpu_seconds(server_pid) if server_pid else math.nan
    consumer.start()
    try:
        _wait_ready(module, consumer, ready, consumer_results)
        producer.start()
        try:
            status, value = producer_results.get(timeout=duration_s + WARMUP_S + PRODUCER_GRACE_S)
        except queue.Empty:
            raise RuntimeError(f"{module}: the producer did not finish {count} sends within "
                               f"{duration_s + WARMUP_S + PRODUCER_GRACE_S:g} s (it cannot keep up)") from None
        produced.set()
        if status != "ok":
            raise RuntimeError(f"{module}: latency producer failed: {value}")
        acked, seconds, producer_cpu = value
        server_cpu = (cpu_seconds(server_pid) if server_pid else math.nan) - server_cpu
        status, outcome = consumer_results.get(timeout=DRAIN_TIMEOUT_S + 120)
        if status != "ok":
            raise RuntimeError(f"{module}: latency consumer failed: {outcome}")
        latencies, consumer_cpu = outcome
    finally:
        for process in (producer, consumer):
            if process.pid is not None:
                process.join(10)
                if process.is_alive():
                    process.kill()
                    process.join()
    timed = count - warmup
    figures = latency_figures(latencies, timed, seconds * timed / count)
    figures["send_errors"] = count - acked
    figures["lost"] = timed - len(latencies)
    figures["producer_cpu_us"] = producer_cpu / count * 1e6
    figures["consumer_cpu_us"] = consumer_cpu / count * 1e6
    figures["server_cpu_us"] = server_cpu / count * 1e6
    return figures
