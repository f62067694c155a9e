"""A failed fsync is fatal: waiting sends fail, nothing is fsynced again, the stop leaves the abort marker."""

from __future__ import annotations

import asyncio
import errno
import os

import pytest
from storekit import make_config, message, open_store, put, read_all, run

from graymq.broker_ext.store.consume_queue import ConsumeQueue
from graymq.broker_ext.store.fatal import StoreFatalError
from graymq.broker_ext.store.mapped_file import MappedFile

pytestmark = pytest.mark.unit


def failing_fdatasync(calls: list[int]):
    def fdatasync(fd: int) -> None:
        calls.append(fd)
        raise OSError(errno.EIO, os.strerror(errno.EIO))
    return fdatasync


def test_a_failed_commit_log_fsync_fails_the_waiting_sends_and_is_never_retried(tmp_path, monkeypatch):
    store = open_store(make_config(tmp_path, flush="sync", flush_interval_ms=10))
    calls: list[int] = []

    async def main() -> None:
        await store.start()
        monkeypatch.setattr(os, "fdatasync", failing_fdatasync(calls))
        results = store.put_messages([message("T", 0, n) for n in range(3)])
        waits = [store.wait_flushed(r.end_offset) for r in results]
        outcomes = await asyncio.gather(*waits, return_exceptions=True)
        assert all(isinstance(o, StoreFatalError) for o in outcomes), outcomes
        error = await asyncio.wait_for(store.fatal.wait(), 5)
        assert "commitlog" in error.message and "EIO" in error.message
        fsyncs = len(calls)
        (late,) = store.put_messages([message("T", 0, 9)])
        with pytest.raises(StoreFatalError):
            await store.wait_flushed(late.end_offset)
        with pytest.raises(StoreFatalError):
            await store.flush()
        await asyncio.sleep(0.05)  # several flush intervals: the loop has ended, nothing runs again
        assert len(calls) == fsyncs == 1
        await store.stop()
        assert len(calls) == fsyncs

    run(main())
    monkeypatch.undo()
    assert (tmp_path / "abort").exists()  # no clean stop: the next load runs crash recovery
    reopened = open_store(make_config(tmp_path))
    assert len(read_all(reopened, "T", 0)) == 4
    run(reopened.stop())


def test_a_failed_consume_queue_fsync_at_a_checkpoint_is_fatal(tmp_path, monkeypatch):
    store = open_store(make_config(tmp_path, checkpoint_interval_ms=10))
    calls: list[object] = []

    def failing_sync(file: MappedFile) -> None:
        calls.append(file)
        raise OSError(errno.EIO, os.strerror(errno.EIO), str(file.path))

    async def main() -> StoreFatalError:
        await store.start()
        put(store, "T", 0, 3)
        monkeypatch.setattr(ConsumeQueue, "sync", lambda queue: failing_sync(queue.files[0]))
        error = await asyncio.wait_for(store.fatal.wait(), 5)
        await asyncio.sleep(0.05)  # several checkpoint intervals: no retry
        assert len(calls) == 1
        await store.stop()
        assert len(calls) == 1
        return error

    error = run(main())
    assert "consumequeue" in error.message and "EIO" in error.message
    assert (tmp_path / "abort").exists()
