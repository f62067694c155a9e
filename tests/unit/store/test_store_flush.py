"""Flushing: group commit shares fsyncs between concurrent sync sends, acks only after the flush."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from storekit import make_config, message, open_store, run

from graymq.broker_ext.store.checkpoint import Checkpoint
from graymq.protocol.errors import FlushTimeoutError

pytestmark = pytest.mark.unit


def record_syncs(store):
    """Wrap the commit log's fsync round; returns the list of end offsets made durable, in order."""
    synced: list[int] = []
    real = store.commitlog.flush

    def flush(start, end):
        real(start, end)
        synced.append(end)

    store.commitlog.flush = flush
    return synced


def test_group_commit_serves_many_concurrent_waiters_with_few_fsyncs(tmp_path):
    store = open_store(make_config(tmp_path, flush="sync", segment_size=1 << 20))
    synced = record_syncs(store)
    acked: list[tuple[int, int]] = []

    async def send(n):
        for _ in range(n % 5):  # interleave the senders
            await asyncio.sleep(0)
        (result,) = store.put_messages([message("T", n % 4, n)])
        await store.wait_flushed(result.end_offset)
        acked.append((result.end_offset, max(synced, default=0)))

    async def main():
        await store.start()
        await asyncio.gather(*(send(n) for n in range(200)))
        await store.stop()

    run(main())
    assert len(acked) == 200
    assert all(end <= durable for end, durable in acked)  # no ack before its bytes were fsynced
    assert 1 <= store.stats.flush_count == len(synced) <= 20
    assert store.stats.flush_seconds_total > 0


def test_a_sync_send_times_out_when_the_flush_does_not_finish(tmp_path):
    store = open_store(make_config(tmp_path, flush="sync", sync_flush_timeout_ms=50))
    release = threading.Event()
    real = store.commitlog.flush
    store.commitlog.flush = lambda start, end: (release.wait(30), real(start, end))

    async def main():
        await store.start()
        (result,) = store.put_messages([message("T", 0, 0)])
        with pytest.raises(FlushTimeoutError, match=str(result.end_offset)):
            await store.wait_flushed(result.end_offset)
        assert store.flushed_offset < result.end_offset
        release.set()
        await store.stop()
        return result

    result = run(main())
    assert Checkpoint.load(tmp_path / "checkpoint").commitlog_offset == result.end_offset


def test_async_mode_acks_at_once_and_the_loop_flushes_in_the_background(tmp_path):
    store = open_store(make_config(tmp_path, flush="async", flush_interval_ms=5))
    synced = record_syncs(store)

    async def main():
        await store.start()
        (result,) = store.put_messages([message("T", 0, 0)])
        await store.wait_flushed(result.end_offset)
        assert store.flushed_offset < result.end_offset  # acked without waiting for the disk
        deadline = time.monotonic() + 10
        while store.flushed_offset < result.end_offset and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        assert store.flushed_offset == result.end_offset
        assert synced and synced[-1] == result.end_offset
        await store.stop()

    run(main())
    assert store.stats.flush_count == len(synced) >= 1


def test_the_abort_marker_lives_while_the_store_is_open(tmp_path):
    store = open_store(make_config(tmp_path))
    assert (tmp_path / "abort").exists()

    async def main():
        await store.start()
        store.put_messages([message("T", 0, n) for n in range(10)])
        await store.stop()

    run(main())
    assert not (tmp_path / "abort").exists()
    checkpoint = Checkpoint.load(tmp_path / "checkpoint")
    assert (checkpoint.commitlog_offset, checkpoint.queue_offsets) == (store.max_physical_offset, {"T": {0: 10}})


def test_the_maintenance_loop_writes_checkpoints(tmp_path):
    store = open_store(make_config(tmp_path, checkpoint_interval_ms=5))

    async def main():
        await store.start()
        store.put_messages([message("T", 3, n) for n in range(7)])
        await store.flush()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            checkpoint = Checkpoint.load(tmp_path / "checkpoint")
            if checkpoint.queue_offsets == {"T": {3: 7}}:
                break
            await asyncio.sleep(0.005)
        assert checkpoint.queue_offsets == {"T": {3: 7}}
        await store.stop()

    run(main())
