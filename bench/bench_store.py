"""Message store throughput: 1 KiB messages appended one by one and in batches of 32, with async
flush and with sync flush (group commit, concurrent writers each waiting for its flush), then
read back with pulls of 32.

    .venv/bin/python -m graymq.bench.bench_store [--count N] [--writers W] [--dir DIR]

Each case runs on a fresh store in a temporary directory (64 MiB segments). Figures are
messages per second and MiB of message bodies per second; sync cases also show how many
fsync rounds served all the sends.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from graymq.broker_ext.store import GetStatus, MessageStore, PutMessage, StoreConfig
from graymq.protocol.record import make_properties

TOPIC = "BenchTopic"
QUEUES = 8
BODY = bytes(range(256)) * 4  # 1 KiB
BATCH = 32
MIB = 1024 * 1024


def make_messages(count: int) -> list[PutMessage]:
    return [
        PutMessage(TOPIC, n % QUEUES, BODY, make_properties(tags="TagA", keys=[f"order-{n}"], msg_id=f"bench-{n:012d}"),
                   born_timestamp=n, born_host="127.0.0.1:40000")
        for n in range(count)
    ]


def report(case: str, count: int, seconds: float, extra: str = "", quiet: bool = False) -> dict[str, float]:
    rate = count / seconds
    if not quiet:
        print(f"{case:<34} {count:>9,} msgs {seconds:8.2f} s {rate:>12,.0f} msgs/s "
              f"{rate * len(BODY) / MIB:>9.1f} MiB/s  {extra}")
    return {"msgs_s": rate, "mib_s": rate * len(BODY) / MIB}


def open_store(root: Path, name: str, flush: str) -> MessageStore:
    store = MessageStore(StoreConfig(store_dir=root / name, segment_size=64 * MIB, flush=flush,  # type: ignore[arg-type]
                                     store_host="127.0.0.1:10911"))
    store.load()
    return store


async def bench_append(root: Path, name: str, flush: str, messages: list[PutMessage], batch: int,
                       writers: int, results: dict[str, dict[str, float]], quiet: bool) -> MessageStore:
    store = open_store(root, name, flush)
    await store.start()
    chunks = [messages[i : i + batch] for i in range(0, len(messages), batch)]

    async def writer(mine: list[list[PutMessage]]) -> None:
        for chunk in mine:
            results = store.put_messages(chunk)
            await store.wait_flushed(results[-1].end_offset)

    began = time.perf_counter()
    if flush == "sync":
        await asyncio.gather(*(writer(chunks[w::writers]) for w in range(writers)))
    else:
        put = store.put_messages
        for chunk in chunks:
            put(chunk)
    seconds = time.perf_counter() - began
    extra = f"({store.stats.flush_count} fsync rounds)" if flush == "sync" else ""
    results[f"append {flush}/batch {batch}"] = report(
        f"append {flush}, batch {batch}" + (f", {writers} writers" if flush == "sync" else ""),
        len(messages), seconds, extra, quiet)
    return store


def bench_read(store: MessageStore, count: int, results: dict[str, dict[str, float]], quiet: bool) -> None:
    began = time.perf_counter()
    read = 0
    for queue_id in range(QUEUES):
        offset = 0
        while True:
            result = store.get_messages(TOPIC, queue_id, offset, BATCH)
            if result.status is not GetStatus.FOUND:
                break
            read += len(result.records)
            offset = result.next_begin_offset
    seconds = time.perf_counter() - began
    assert read == count, (read, count)
    results[f"read/pulls of {BATCH}"] = report(f"read, pulls of {BATCH} (zero-copy views)", read, seconds, quiet=quiet)


async def main_async(root: Path, count: int, writers: int, quiet: bool = False) -> dict[str, dict[str, float]]:
    """Every case on a fresh store under ``root``; figures per case (msgs/s, MiB/s)."""
    results: dict[str, dict[str, float]] = {}
    messages = make_messages(count)
    cases: list[tuple[str, str, int, int]] = [
        ("async-1", "async", 1, 1), ("async-32", "async", BATCH, 1),
        ("sync-1", "sync", 1, writers), ("sync-32", "sync", BATCH, writers),
    ]
    first: MessageStore | None = None
    for name, flush, batch, case_writers in cases:
        store = await bench_append(root, name, flush, messages, batch, case_writers, results, quiet)
        if first is None:
            first = store
        else:
            await store.stop()
    assert first is not None
    bench_read(first, count, results, quiet)
    await first.stop()
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=100_000, help="messages per case")
    parser.add_argument("--writers", type=int, default=64, help="concurrent writers in sync cases")
    parser.add_argument("--dir", type=Path, default=None, help="where to create the stores (default: a temp dir)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="graymq-bench-", dir=args.dir) as tmp:
        asyncio.run(main_async(Path(tmp), args.count, args.writers))


if __name__ == "__main__":
    main()
