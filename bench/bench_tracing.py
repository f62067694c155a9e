"""What tracing costs: the client's span hooks (``graymq.client.tracing``) per message, off and on, and awaited
sends through a broker with tracing off and on, in one run.

- hooks: ``send_span`` then ``process_spans`` for one message, in a loop without network — off (the OpenTelemetry
  API installed, no tracer provider configured: what every application that does not trace runs) and on (the
  SDK's provider with a span processor that drops what it gets, so only graymq's and the SDK's span work counts);
  against the same loop without the hooks;
- sends: awaited single sends (each awaited before the next) with the client library against a broker process,
  in a fresh Python process per setting (a tracer provider, once set, stays for the process).

    python -m graymq.bench.bench_tracing [--sends N]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from graymq.bench.common import Figures

HOOK_CALLS = 100_000


def _hook_loop(hooks: bool) -> float:
    """Seconds per message of a loop that builds what a send and a delivery would, with or without the hooks."""
    from graymq.client import tracing
    from graymq.protocol.record import MessageExt

    message = MessageExt("T", b"x", 0, 0, 0, properties={"a": "1"}, broker_name="b")
    batch = [message]
    began = time.perf_counter()
    for _ in range(HOOK_CALLS):
        if hooks:
            with tracing.send_span("T", "G", "c", False, message.properties) as sending:
                sending.stored("ID", "b", 0)
            with tracing.process_spans("G", batch) as processing:
                processing.finished(True)
        else:
            dict(message.properties)
    return (time.perf_counter() - began) / HOOK_CALLS


def _configure_sdk() -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    class Dropping(SpanExporter):
        def export(self, spans):  # type: ignore[no-untyped-def]
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Dropping()))
    trace.set_tracer_provider(provider)


def hooks(traced: bool) -> Figures:
    """The hooks' cost per message in µs (one process per setting)."""
    if traced:
        _configure_sdk()
    best: Callable[[bool], float] = lambda with_hooks: min(_hook_loop(with_hooks) for _ in range(3))  # noqa: E731
    bare, hooked = best(False), best(True)
    return {"hooks_us_per_msg": round((hooked - bare) * 1e6, 3)}


def sends(traced: bool, count: int) -> Figures:
    """Awaited single sends against a broker of a fresh name server, with or without a configured SDK."""
    import asyncio

    from graymq.bench.graymq_servers import Broker, NameServer, create_topic
    from graymq.client import Message, Producer

    if traced:
        _configure_sdk()
    with tempfile.TemporaryDirectory() as tmp, NameServer(Path(tmp) / "ns", Path(tmp)).wait_ready() as ns, \
            Broker("broker-a", Path(tmp) / "broker-a", Path(tmp), nameserver=ns.url).wait_ready():

        async def run() -> float:
            admin = ns.admin()
            try:
                await create_topic(admin, "TRACE_BENCH", 4, 0, {"broker-a"})
            finally:
                await admin.close()
            producer = Producer("GID_TRACE_BENCH", ns.url, auto_batch=False)
            await producer.start()
            try:
                await producer.send(Message("TRACE_BENCH", b"warm-up"))
                began = time.perf_counter()
                for seq in range(count):
                    await producer.send(Message("TRACE_BENCH", b"x" * 1024, keys=[str(seq)]))
                return time.perf_counter() - began
            finally:
                await producer.stop()

        elapsed = asyncio.run(run())
    return {"awaited_sends_per_s": round(count / elapsed), "send_us": round(elapsed / count * 1e6, 1)}


def run(count: int) -> dict[str, Figures]:
    """Each setting in its own process: off, then on."""
    out: dict[str, Figures] = {}
    for label, traced in (("tracing off", False), ("tracing on (SDK, dropping exporter)", True)):
        figures: Figures = {}
        for what in ("hooks", "sends"):
            done = subprocess.run([sys.executable, "-m", "graymq.bench.bench_tracing", "--one", what,
                                   "--sends", str(count)] + (["--traced"] if traced else []),
                                  capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                figures["error"] = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"
                break
            figures.update(json.loads(done.stdout.strip().splitlines()[-1]))
        out[label] = figures
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sends", type=int, default=3000)
    parser.add_argument("--one", choices=("hooks", "sends"))
    parser.add_argument("--traced", action="store_true")
    args = parser.parse_args()
    if args.one == "hooks":
        print(json.dumps(hooks(args.traced)))
    elif args.one == "sends":
        print(json.dumps(sends(args.traced, args.sends)))
    else:
        for label, figures in run(args.sends).items():
            print(f"{label:40} " + "  ".join(f"{k} {v}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
