"""Damage is a hole, never the end: recovery keeps every sound record after it, reads never serve it, and every
hole is recorded, logged at ERROR once and counted."""

from __future__ import annotations

import json
import logging

import pytest
from storekit import (
    crash,
    flip_bit,
    make_config,
    message,
    open_store,
    patch_file,
    put,
    read_all,
    run,
    segment_file,
    stop,
)

from graymq.broker_ext.store import GetStatus
from graymq.broker_ext.store.consume_queue import HOLE_SIZE, UNIT
from graymq.broker_ext.store.index_file import ENTRY
from graymq.protocol.record import RECORD_HEADER, decode_record

pytestmark = pytest.mark.unit

MAGIC_AT = 4  # the magic follows the record's uint32 size


def sent_offsets(results):
    return [(r.queue_offset, r.physical_offset) for r in results]


def offsets(messages):
    return [(m.queue_offset, m.commit_log_offset) for m in messages]


def hole_errors(caplog):
    return [r for r in caplog.records if r.levelno == logging.ERROR and "hole" in r.getMessage()]


@pytest.mark.parametrize("how", ["clean stop", "crash"])
def test_one_damaged_magic_loses_exactly_that_record_of_a_sync_flushed_store(tmp_path, caplog, how):
    # 3,000 acked records over 3 segments: a crash recovery scans them all (checkpoint in the last segment, two back)
    config = make_config(tmp_path, flush="sync", segment_size=256 * 1024)
    store = open_store(config)
    results = put(store, "T", 0, 3000, size=150)
    end = store.max_physical_offset
    if how == "clean stop":
        stop(store)
    else:
        run(store.flush())
        run(store.write_checkpoint())
        crash(store)
    victim = results[1500]
    path, pos = segment_file(store, victim.physical_offset)
    flip_bit(path, pos + MAGIC_AT + 1)

    store = open_store(config)
    assert store.max_physical_offset == end  # nothing after the damage was cut
    survivors = [r for r in results if r is not victim]
    assert offsets(read_all(store, "T", 0)) == sent_offsets(survivors)
    assert (store.stats.damaged_records, store.stats.damaged_bytes) == (1, victim.size)
    (logged,) = hole_errors(caplog)
    assert str(victim.physical_offset) in logged.getMessage()
    (again,) = store.put_messages([message("T", 0, 3000)])
    assert (again.queue_offset, again.physical_offset) == (3000, end)

    caplog.clear()
    run(store.write_checkpoint())  # a running broker's next round records the hole
    crash(store)
    store = open_store(config)  # found again by a later recovery, or never served again: no second ERROR
    assert len(read_all(store, "T", 0)) == 3000
    assert hole_errors(caplog) == []
    holes = json.loads((tmp_path / "holes").read_text())["holes"]
    assert [(h["physical_offset"], h["length"]) for h in holes] == [(victim.physical_offset, victim.size)]


def test_a_damaged_crc_after_a_clean_stop_is_skipped_by_reads_and_the_queue_keeps_flowing(tmp_path, caplog):
    config = make_config(tmp_path)
    store = open_store(config)
    results = put(store, "T", 0, 200, size=300)
    stop(store)
    victim = results[77]
    path, pos = segment_file(store, victim.physical_offset)
    flip_bit(path, pos + victim.size - 20, bit=5)

    store = open_store(config)  # a clean stop: recovery scans nothing
    assert hole_errors(caplog) == []
    at = store.get_messages("T", 0, 77, 1)
    assert (at.status, at.next_begin_offset) == (GetStatus.FOUND, 79)
    assert decode_record(bytes(at.records[0])).queue_offset == 78
    assert [m.queue_offset for m in read_all(store, "T", 0)] == [n for n in range(200) if n != 77]
    assert len(hole_errors(caplog)) == 1  # once, though read twice: the unit is a hole now
    assert store.queues.get("T", 0).unit(77)[1] == HOLE_SIZE
    assert (store.stats.damaged_records, store.stats.damaged_bytes) == (1, victim.size)
    again = store.get_messages("T", 0, 77, 1)
    assert (again.status, again.next_begin_offset) == (GetStatus.FOUND, 79)

    stop(store)
    holes = json.loads((tmp_path / "holes").read_text())["holes"]
    assert [(h["physical_offset"], h["reason"][:12]) for h in holes] == [(victim.physical_offset, "CRC mismatch")]


def test_a_read_skips_a_sound_record_that_is_not_the_units_and_says_so(tmp_path, caplog):
    config = make_config(tmp_path)
    store = open_store(config)
    results = put(store, "T", 0, 10)
    stop(store)
    wrong = results[6]  # unit 5 now points at message 6's record
    patch_file(tmp_path / "consumequeue" / "T" / "0" / f"{0:020d}", 5 * UNIT.size,
               UNIT.pack(wrong.physical_offset, wrong.size, 0))

    store = open_store(config)
    assert [m.queue_offset for m in read_all(store, "T", 0)] == [0, 1, 2, 3, 4, 6, 7, 8, 9]
    (logged,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert "consume queue T/0 offset 5" in logged.getMessage() and "queue 0 offset 6" in logged.getMessage()
    assert (store.stats.bad_units, store.stats.damaged_records, store.stats.damaged_bytes) == (1, 0, 0)
    assert store.holes.holes == {}


def test_a_unit_pointing_into_the_middle_of_a_sound_record_is_a_bad_unit_not_a_hole(tmp_path, caplog):
    config = make_config(tmp_path)
    store = open_store(config)
    results = put(store, "T", 0, 10)
    stop(store)
    inside = results[5]
    patch_file(tmp_path / "consumequeue" / "T" / "0" / f"{0:020d}", 5 * UNIT.size,
               UNIT.pack(inside.physical_offset + 20, 1 << 30, 0))  # 20 bytes in, a garbage size

    store = open_store(config)
    assert [m.queue_offset for m in read_all(store, "T", 0)] == [0, 1, 2, 3, 4, 6, 7, 8, 9]
    assert [m.queue_offset for m in read_all(store, "T", 0)] == [0, 1, 2, 3, 4, 6, 7, 8, 9]
    (logged,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert "consume queue T/0 offset 5" in logged.getMessage() and "the unit is wrong" in logged.getMessage()
    assert (store.stats.bad_units, store.stats.damaged_records, store.stats.damaged_bytes) == (1, 0, 0)
    stop(store)
    assert not (tmp_path / "holes").exists() or json.loads((tmp_path / "holes").read_text())["holes"] == []


def test_a_torn_header_followed_by_acked_records_loses_nothing_else_at_the_next_crash(tmp_path):
    config = make_config(tmp_path, segment_size=512 * 1024)
    store = open_store(config)
    first = put(store, "T", 0, 1000, size=100)
    stop(store)
    victim = first[400]
    path, pos = segment_file(store, victim.physical_offset)
    patch_file(path, pos, bytes(RECORD_HEADER.size // 2))  # half the header never landed

    store = open_store(config)  # a clean stop: nothing scanned, the damage is still on disk
    later = put(store, "T", 0, 500, start=1000, size=100)
    run(store.flush())
    crash(store)

    store = open_store(config)
    expected = [r for r in first if r is not victim] + later
    assert offsets(read_all(store, "T", 0)) == sent_offsets(expected)
    assert store.max_physical_offset == later[-1].end_offset
    assert store.stats.damaged_records == 1


def test_a_zeroed_segment_in_the_middle_is_a_hole_and_later_segments_are_kept(tmp_path):
    config = make_config(tmp_path)
    store = open_store(config)
    results = put(store, "T", 0, 600, size=300)
    assert len(store.commitlog.segments) >= 4
    crash(store)
    size = config.segment_size
    patch_file(tmp_path / "commitlog" / f"{size:020d}", 0, bytes(size))
    (tmp_path / "checkpoint").unlink()  # recovery scans the whole log

    store = open_store(config)
    survivors = [r for r in results if not size <= r.physical_offset < 2 * size]
    assert offsets(read_all(store, "T", 0)) == sent_offsets(survivors)
    assert store.max_physical_offset == results[-1].end_offset
    assert store.stats.damaged_bytes == size


def test_a_damaged_end_of_segment_marker_keeps_the_next_segment(tmp_path):
    config = make_config(tmp_path)
    store = open_store(config)
    results = put(store, "T", 0, 400, size=500)
    crash(store)
    size = config.segment_size
    last_in_first = max((r for r in results if r.end_offset <= size), key=lambda r: r.end_offset)
    assert size - last_in_first.end_offset >= 8  # the segment ends with a marker
    patch_file(tmp_path / "commitlog" / f"{0:020d}", last_in_first.end_offset + MAGIC_AT, b"\x00\x00\x00\x01")
    (tmp_path / "checkpoint").unlink()

    store = open_store(config)
    assert offsets(read_all(store, "T", 0)) == sent_offsets(results)


def test_a_partly_written_last_record_is_a_torn_tail_and_is_cut(tmp_path):
    config = make_config(tmp_path)
    store = open_store(config)
    results = put(store, "T", 0, 100, size=400)
    crash(store)
    last = results[-1]
    path, pos = segment_file(store, last.physical_offset)
    patch_file(path, pos + RECORD_HEADER.size + 50, bytes(last.size - RECORD_HEADER.size - 50))

    store = open_store(config)
    assert store.max_physical_offset == last.physical_offset
    assert offsets(read_all(store, "T", 0)) == sent_offsets(results[:-1])
    assert store.stats.damaged_records == 0  # a torn tail is not a hole: nothing after it was acked
    with open(path, "rb") as f:  # the torn bytes are gone
        f.seek(pos)
        assert f.read(last.size) == bytes(last.size)


def test_recovery_rebuilds_a_consume_queue_unit_pointing_at_the_wrong_place(tmp_path):
    config = make_config(tmp_path)
    store = open_store(config)
    results = put(store, "T", 0, 50, tags="A")
    crash(store)
    cq = tmp_path / "consumequeue" / "T" / "0" / f"{0:020d}"
    patch_file(cq, 20 * UNIT.size, UNIT.pack(results[21].physical_offset + 7, 99, 12345))

    store = open_store(config)
    assert store.queues.get("T", 0).unit(20) == (results[20].physical_offset, results[20].size,
                                                 store.queues.get("T", 0).unit(19)[2])
    assert offsets(read_all(store, "T", 0, frozenset({"A"}))) == sent_offsets(results)


def test_recovery_drops_index_entries_pointing_at_no_record(tmp_path):
    config = make_config(tmp_path)
    store = open_store(config)
    results = put(store, "T", 0, 30, keys=("order",))
    crash(store)
    index_file = tmp_path / "index" / f"{0:020d}"
    entries = list(ENTRY.iter_unpack(index_file.read_bytes()))
    key_hash, _, timestamp = entries[3]
    patch_file(index_file, 3 * ENTRY.size, ENTRY.pack(key_hash, results[5].physical_offset + 3, timestamp))

    store = open_store(config)
    starts = {r.physical_offset for r in results}
    assert {offset for _, offset, _ in ENTRY.iter_unpack(store.index.files[0].read_entries())} <= starts
    assert len(store.query_by_key("T", "order", max_num=100)) == 30


def test_unflushed_bytes_and_age_follow_appends_and_flushes(tmp_path):
    store = open_store(make_config(tmp_path))
    stats = store.stats
    assert (stats.unflushed_bytes, stats.unflushed_since, stats.unflushed_age_s()) == (0, None, 0.0)
    first = put(store, "T", 0, 3)
    since = stats.unflushed_since
    assert stats.unflushed_bytes == first[-1].end_offset - first[0].physical_offset and since is not None
    put(store, "T", 0, 2, start=3)
    assert stats.unflushed_since == since  # the oldest unflushed append is still the first one
    assert stats.unflushed_age_s(since + 2.5) == 2.5
    run(store.flush())
    assert (stats.unflushed_bytes, stats.unflushed_since, stats.unflushed_age_s()) == (0, None, 0.0)
    (r,) = put(store, "T", 0, 1, start=5)
    assert stats.unflushed_bytes == r.size and stats.unflushed_since > since
    stop(store)
