"""Broker throughput over the wire (issue 3): produce then consume N 1 KiB messages against a real
``graymq broker`` process, single sends and batches, async and sync flush.

    .venv/bin/python -m graymq.bench.bench_broker [--count N] [--flush async,sync] [--mode single,batch]

The client is the library's raw ``BrokerClient`` (no name server, no routing): single = one
SEND_MESSAGE per message with 64 outstanding, batch = SEND_BATCH of 64 with 4 outstanding, over
one connection; consume = one long-polling pull loop per queue, pulls of 64, every record
decoded and CRC-checked as the consumer library does, offsets committed on the next pull.
Each case runs on a fresh broker and store; the broker's peak RSS (VmHWM) is reported, and the CPU
time per message of the broker and of the client — the figure to compare on a shared machine.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import tempfile
import time
from pathlib import Path

from graymq.bench.common import (
    BATCH,
    Figures,
    payload,
    produce_consume_figures,
    timed_produce,
)
from graymq.bench.graymq_servers import Broker, create_topic_on_broker
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.broker_client import BrokerClient
from graymq.protocol.record import iter_records

TOPIC = "BenchRaw"
QUEUES = 8
GROUP = "bench_raw"
HOST = socket.gethostname()


def _message(seq: int) -> pb.Message:
    return pb.Message(topic=TOPIC, body=payload(seq), tags="bench", msg_id=f"{seq:032X}",
                      born_timestamp=int(time.time() * 1000), born_host=HOST)


async def produce(client: BrokerClient, address: str, count: int, batched: bool) -> float:
    async def single(first: int, n: int) -> None:
        await client.send(address, pb.SendRequest(producer_group=GROUP, queue_id=first % QUEUES,
                                                  message=_message(first)))

    async def batch(first: int, n: int) -> None:
        req = pb.SendBatchRequest(producer_group=GROUP, topic=TOPIC, queue_id=(first // BATCH) % QUEUES,
                                  messages=[_message(s) for s in range(first, first + n)])
        await client.send_batch(address, req)

    return await timed_produce(count, batched, single, batch)


async def consume(client: BrokerClient, address: str, count: int) -> float:
    """Pull every queue to its end; seconds from the first message received to the last."""
    received = 0
    first_at: float | None = None
    done = asyncio.Event()

    async def queue_loop(queue_id: int) -> None:
        nonlocal received, first_at
        offset = 0
        committed = -1
        while not done.is_set():
            req = pb.PullRequest(consumer_group=GROUP, client_id="bench", topic=TOPIC, queue_id=queue_id,
                                 queue_offset=offset, max_msg_nums=BATCH, suspend_timeout_ms=1000,
                                 commit_offset=committed, sub_expression="*")
            resp = await client.pull(address, req)
            if resp.status == pb.FOUND:
                if first_at is None:
                    first_at = time.perf_counter()
                n = sum(1 for _ in iter_records(resp.records))
                received += n
                if received >= count:
                    done.set()
            offset = committed = resp.next_begin_offset

    # One connection per pull loop would be closer to a pool; the library's consumer shares one.
    tasks = [asyncio.create_task(queue_loop(q)) for q in range(QUEUES)]
    await done.wait()
    end = time.perf_counter()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert first_at is not None
    return end - first_at


async def measure(broker: Broker, client: BrokerClient, count: int, batched: bool) -> Figures:
    """Warm up (connection and its handshakes, imports, the first segment and consume-queue files), then produce
    and consume ``count`` messages through ``client``, which is closed afterwards."""
    try:
        await produce(client, broker.address, 1, batched=False)
        return await produce_consume_figures(
            broker, count, lambda: produce(client, broker.address, count, batched),
            lambda: consume(client, broker.address, count + 1))
    finally:
        await client.close()


async def run_case(root: Path, log_dir: Path, flush: str, batched: bool, count: int, name: str) -> Figures:
    broker = Broker(name, root / name, log_dir, flush=flush).wait_ready()
    try:
        await create_topic_on_broker(broker.address, TOPIC, QUEUES)
        return await measure(broker, BrokerClient(timeout_s=30), count, batched)
    finally:
        broker.stop()


CASES = [(flush, mode) for flush in ("async", "sync") for mode in ("single", "batch")]


async def run_all(count: int, flushes: list[str], modes: list[str], root: Path) -> dict[str, Figures]:
    results = {}
    for i, (flush, mode) in enumerate(c for c in CASES if c[0] in flushes and c[1] in modes):
        results[f"{flush}/{mode}"] = await run_case(root, root, flush, mode == "batch", count, f"raw{i}")
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=50_000)
    parser.add_argument("--flush", default="async,sync")
    parser.add_argument("--mode", default="single,batch")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="graymq-bench-broker-") as tmp:
        results = asyncio.run(run_all(args.count, args.flush.split(","), args.mode.split(","), Path(tmp)))
    print(f"{'case':<14} {'produce msg/s':>14} {'MiB/s':>8} {'consume msg/s':>14} {'MiB/s':>8} {'RSS MiB':>8}"
          "   CPU us/msg: produce broker/client, consume broker/client")
    for case, f in results.items():
        print(f"{case:<14} {f['produce_msgs_s']:>14,.0f} {f['produce_mib_s']:>8.1f} {f['consume_msgs_s']:>14,.0f} "
              f"{f['consume_mib_s']:>8.1f} {f['broker_peak_rss_mib']:>8.1f}   {f['produce_broker_cpu_us']:6.1f} "
              f"{f['produce_client_cpu_us']:6.1f} {f['consume_broker_cpu_us']:6.1f} {f['consume_client_cpu_us']:6.1f}")


if __name__ == "__main__":
    main()
