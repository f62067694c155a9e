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


def test_the_check_holds_the_shared_lock_even_when_the_lock_file_was_missing(tmp_path, monkeypatch):
    import subprocess
    import sys

    import graymq.broker_ext.store.verify as verify

    store_dir = tmp_path / "store"
    stop(open_store(make_config(store_dir)))
    (store_dir / "lock").unlink()
    probes: list[str] = []
    real_scan = verify.scan_log

    def scan_while_a_broker_tries_to_start(*args, **kwargs):
        probe = subprocess.run(
            [sys.executable, "-c", "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); "
                                   "fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)", str(store_dir / "lock")],
            capture_output=True, text=True)
        probes.append(probe.stderr)
        return real_scan(*args, **kwargs)

    monkeypatch.setattr(verify, "scan_log", scan_while_a_broker_tries_to_start)
    assert verify_store(store_dir).clean
    assert len(probes) == 1 and ("BlockingIOError" in probes[0] or "PermissionError" in probes[0])


def test_a_store_whose_lock_file_cannot_be_created_is_a_clear_error(tmp_path, monkeypatch):
    import errno
    import os

    import graymq.broker_ext.store.lock as lock

    store_dir = tmp_path / "store"
    stop(open_store(make_config(store_dir)))
    (store_dir / "lock").unlink()

    def read_only_fs(path, flags, mode=0o777):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

    monkeypatch.setattr(lock.os, "open", read_only_fs)
    with pytest.raises(ConfigError, match="cannot create its lock file lock .*not writable"):
        verify_store(store_dir)


def test_repair_drops_recorded_holes_a_full_scan_does_not_confirm(tmp_path):
    import json

    config = make_config(tmp_path)
    store = open_store(config)
    results = put(store, "T", 0, 20, size=400)
    stop(store)
    victim, sound = results[5], results[12]
    path, pos = segment_file(store, victim.physical_offset)
    flip_bit(path, pos + victim.size - 1)
    bogus = {"file": "commitlog/" + path.name, "offset": sound.physical_offset, "length": 1 << 30,
             "reason": "recorded by a wrong unit", "physical_offset": sound.physical_offset}
    (tmp_path / "holes").write_text(json.dumps({"holes": [bogus]}))

    report = verify_store(tmp_path, repair=True)
    assert [h.physical_offset for h in report.holes] == [victim.physical_offset]
    recorded = json.loads((tmp_path / "holes").read_text())["holes"]
    assert [h["physical_offset"] for h in recorded] == [victim.physical_offset]
    assert report.recorded == {victim.physical_offset}
