"""Retention by age and by disk watermark; writes refused above the critical watermark."""

from __future__ import annotations

import asyncio
import os
import time

import pytest
from storekit import make_config, message, open_store, put, read_all, run, stop

from graymq.broker_ext.store import GetStatus
from graymq.protocol.errors import DiskFullError

pytestmark = pytest.mark.unit

HOUR = 3600


def filled(tmp_path, disk=lambda: 0.1, **overrides):
    """A store with ~6 segments of 2 queues, flushed so that retention may delete them."""
    store = open_store(make_config(tmp_path, **overrides), disk_usage=lambda _path: disk())
    results = {0: [], 1: []}
    for n in range(1200):
        (r,) = store.put_messages([message("T", n % 2, n, size=300, keys=(f"k{n}",))])
        results[n % 2].append(r)
    run(store.flush())
    assert len(store.commitlog.segments) >= 6
    return store, results


def age(path, hours):
    then = time.time() - hours * HOUR
    os.utime(path, (then, then))


def test_segments_older_than_the_retention_go_with_their_queue_and_index_files(tmp_path):
    store, results = filled(tmp_path, retention_hours=72, cq_units_per_file=32)
    segments = [s.path for s in store.commitlog.segments]
    cq_files_before = len(list((tmp_path / "consumequeue" / "T" / "0").iterdir()))
    for path in segments[:3]:
        age(path, 100)

    assert store.run_retention() == 3
    new_min = store.min_physical_offset
    assert new_min == store.commitlog.segments[0].start and not any(p.exists() for p in segments[:3])
    assert store.stats.deleted_segments == 3 and store.stats.segments == len(segments) - 3
    for q, sent in results.items():
        survivors = [r for r in sent if r.physical_offset >= new_min]
        assert store.get_min_offset("T", q) == survivors[0].queue_offset
        assert [m.queue_offset for m in read_all(store, "T", q)] == [r.queue_offset for r in survivors]
        early = store.get_messages("T", q, 0, 10)
        assert (early.status, early.next_begin_offset) == (GetStatus.OFFSET_ILLEGAL, survivors[0].queue_offset)
    assert len(list((tmp_path / "consumequeue" / "T" / "0").iterdir())) < cq_files_before
    assert sorted(int(p.name) for p in (tmp_path / "index").iterdir()) == [
        s.start for s in store.commitlog.segments
    ]
    assert store.query_by_key("T", "k0") == [] and len(store.query_by_key("T", "k1199")) == 1

    min_offsets = {q: store.get_min_offset("T", q) for q in results}
    stop(store)
    store = open_store(make_config(tmp_path, retention_hours=72, cq_units_per_file=32))
    assert {q: store.get_min_offset("T", q) for q in results} == min_offsets


def test_the_active_segment_and_unflushed_segments_are_never_deleted(tmp_path):
    store = open_store(make_config(tmp_path))
    put(store, "T", 0, 1000, size=300)
    assert store.run_retention(now=time.time() + 1000 * HOUR) == 0  # nothing flushed yet
    run(store.flush())
    segments = len(store.commitlog.segments)
    assert store.run_retention(now=time.time() + 1000 * HOUR) == segments - 1
    assert len(store.commitlog.segments) == 1
    assert store.get_min_offset("T", 0) == store.get_max_offset("T", 0) - len(read_all(store, "T", 0))
    (r,) = store.put_messages([message("T", 0, 1000)])
    assert r.queue_offset == 1000


def test_above_the_warn_watermark_the_oldest_segments_go_even_if_young(tmp_path):
    def usage():  # every segment file adds 5 % to a half-full disk
        return 0.5 + 0.05 * len(os.listdir(tmp_path / "commitlog"))

    store, results = filled(tmp_path, disk=usage, disk_warn_ratio=0.7, disk_critical_ratio=0.99)
    before = len(store.commitlog.segments)
    assert store.run_retention() == before - 4  # down to 0.5 + 4 * 0.05, no longer above 0.7
    assert store.disk_usage_ratio() == pytest.approx(0.7)
    survivors = [r for r in results[0] if r.physical_offset >= store.min_physical_offset]
    assert [m.queue_offset for m in read_all(store, "T", 0)] == [r.queue_offset for r in survivors]


def test_writes_are_refused_above_the_critical_watermark(tmp_path):
    usage = {"ratio": 0.2}
    store = open_store(make_config(tmp_path, checkpoint_interval_ms=5), disk_usage=lambda _p: usage["ratio"])
    store.put_messages([message("T", 0, 0)])
    usage["ratio"] = 0.95
    store.disk_usage_ratio()
    with pytest.raises(DiskFullError, match="95.0%") as refused:
        store.put_messages([message("T", 0, 1)])
    assert refused.value.retriable
    assert store.get_max_offset("T", 0) == 1
    usage["ratio"] = 0.5
    store.disk_usage_ratio()
    assert store.put_messages([message("T", 0, 1)])[0].queue_offset == 1

    async def refused_once_the_loop_measures():
        await store.start()
        usage["ratio"] = 0.97
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                store.put_messages([message("T", 0, 2)])
            except DiskFullError:
                break
            await asyncio.sleep(0.005)
        else:
            pytest.fail("the maintenance loop never noticed the full disk")
        await store.stop()

    run(refused_once_the_loop_measures())
