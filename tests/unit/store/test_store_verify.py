"""The offline check behind ``graymq broker verify``: read-only, the same findings recovery repairs."""

from __future__ import annotations

from pathlib import Path

import pytest
from storekit import crash, flip_bit, make_config, open_store, patch_file, put, read_all, segment_file, stop

from graymq.broker_ext.store.consume_queue import UNIT
from graymq.broker_ext.store.index_file import ENTRY
from graymq.broker_ext.store.store_check import ENTRY_STRAY, UNIT_DISAGREES, UNIT_STRAY
from graymq.broker_ext.store.verify import verify_store
from graymq.protocol.errors import ConfigError

pytestmark = pytest.mark.unit


def snapshot(store_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(store_dir)): p.read_bytes() for p in sorted(store_dir.rglob("*")) if p.is_file()}


def test_a_clean_store_verifies_clean(tmp_path):
    store = open_store(make_config(tmp_path))
    put(store, "T", 0, 300, size=400, keys=("k",))
    put(store, "T", 1, 300, size=400, tags="t")
    stop(store)
    report = verify_store(tmp_path)
    assert report.clean and report.clean_stop
    assert report.to_json()["holes"] == [] and report.to_json()["torn_tail"] is None


def test_the_check_changes_nothing_and_finds_what_recovery_would_repair(tmp_path):
    config = make_config(tmp_path)
    store = open_store(config)
    results = put(store, "T", 0, 300, size=400, keys=("k",))
    crash(store)
    victim = results[100]
    path, pos = segment_file(store, victim.physical_offset)
    flip_bit(path, pos + victim.size - 1)
    tail_path, tail_pos = segment_file(store, results[-1].end_offset)
    patch_file(tail_path, tail_pos + 10, b"\x01garbage")
    before = snapshot(tmp_path)

    report = verify_store(tmp_path)
    assert snapshot(tmp_path) == before
    assert not report.clean and not report.clean_stop
    assert [(h.physical_offset, h.length, h.reason[:12]) for h in report.holes] == [
        (victim.physical_offset, victim.size, "CRC mismatch")]
    assert report.torn_tail is not None and report.torn_tail.physical_offset == results[-1].end_offset
    assert [(f.file, f.first, f.reason) for f in report.findings] == [
        ("consumequeue/T/0", 100, UNIT_STRAY), (f"index/{path.name}", victim.physical_offset, ENTRY_STRAY)]

    repaired = verify_store(tmp_path, repair=True)
    assert repaired.repaired and [h.physical_offset for h in repaired.holes] == [victim.physical_offset]
    again = verify_store(tmp_path)
    assert (again.torn_tail, again.findings) == (None, [])
    assert [h.physical_offset for h in again.holes] == [victim.physical_offset] and again.recorded == {
        victim.physical_offset}
    store = open_store(config)
    assert [m.queue_offset for m in read_all(store, "T", 0)] == [n for n in range(300) if n != 100]
    stop(store)


def test_a_wrong_consume_queue_unit_on_a_sound_log_is_repaired_to_clean(tmp_path):
    config = make_config(tmp_path)
    store = open_store(config)
    results = put(store, "T", 0, 40)
    stop(store)
    patch_file(tmp_path / "consumequeue" / "T" / "0" / f"{0:020d}", 7 * UNIT.size,
               UNIT.pack(results[9].physical_offset, results[9].size, 0))
    index_file = tmp_path / "index" / f"{0:020d}"
    key_hash, _, timestamp = ENTRY.unpack_from(index_file.read_bytes(), 0)
    patch_file(index_file, 0, ENTRY.pack(key_hash, 5, timestamp))

    report = verify_store(tmp_path)
    assert report.holes == [] and report.torn_tail is None
    assert [(f.file, f.first, f.count, f.reason) for f in report.findings] == [
        ("consumequeue/T/0", 7, 1, UNIT_DISAGREES), ("index/00000000000000000000", 5, 1, ENTRY_STRAY)]
    assert verify_store(tmp_path, repair=True).findings == report.findings
    assert verify_store(tmp_path).clean
    store = open_store(config)
    assert [m.queue_offset for m in read_all(store, "T", 0)] == list(range(40))
    stop(store)


def test_a_store_held_by_another_process_or_missing_cannot_be_verified(tmp_path):
    import subprocess
    import sys

    store_dir = tmp_path / "store"
    stop(open_store(make_config(store_dir)))
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys; f = open(sys.argv[1], 'r+'); fcntl.lockf(f, fcntl.LOCK_EX); "
                               "print('locked', flush=True); sys.stdin.read()", str(store_dir / "lock")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        with pytest.raises(ConfigError, match="in use by another process"):
            verify_store(store_dir)
        with pytest.raises(ConfigError, match="in use by another process"):
            verify_store(store_dir, repair=True)
    finally:
        holder.communicate("")
    assert verify_store(store_dir).clean
    with pytest.raises(ConfigError, match="no such directory"):
        verify_store(tmp_path / "missing")
