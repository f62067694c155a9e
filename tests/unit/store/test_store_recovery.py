"""Recovery at load: torn tails, damaged records, garbage, lost or overlong consume queues, clean restarts."""

from __future__ import annotations

import random
import shutil
import struct

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
from graymq.broker_ext.store.checkpoint import Checkpoint
from graymq.broker_ext.store.consume_queue import UNIT
from graymq.protocol.record import RECORD_HEADER, decode_record

pytestmark = pytest.mark.unit


def fill(store, queues=3, count=600, size=300):
    """``count`` messages spread round-robin over ``queues`` queues of topic T, with keys and tags."""
    results = {q: [] for q in range(queues)}
    for n in range(count):
        q = n % queues
        (r,) = store.put_messages([message("T", q, n, size=size, tags="even" if n % 2 == 0 else "odd",
                                           keys=(f"key-{n}",))])
        results[q].append(r)
    return results


def offsets(messages):
    return [(m.queue_offset, m.commit_log_offset) for m in messages]


def test_a_clean_restart_keeps_everything_and_appends_where_it_left_off(tmp_path):
    config = make_config(tmp_path)
    store = open_store(config)
    sent = fill(store)
    before = {q: offsets(read_all(store, "T", q)) for q in sent}
    end, table = store.max_physical_offset, store.queue_table()
    stop(store)
    assert not (tmp_path / "abort").exists()
    assert Checkpoint.load(tmp_path / "checkpoint").commitlog_offset == end

    store = open_store(config)
    assert (store.max_physical_offset, store.flushed_offset, store.queue_table()) == (end, end, table)
    assert {q: offsets(read_all(store, "T", q)) for q in sent} == before
    assert [decode_record(r).msg_id for r in store.query_by_key("T", "key-42")] == ["T-0-42"]
    (r,) = store.put_messages([message("T", 1, 9999)])
    assert (r.queue_offset, r.physical_offset) == (200, end)


@pytest.mark.parametrize("cut_into", [RECORD_HEADER.size // 2, RECORD_HEADER.size + 10])
def test_a_torn_tail_is_cut_and_the_queue_units_pointing_at_it_dropped(tmp_path, cut_into):
    config = make_config(tmp_path)
    store = open_store(config)
    results = put(store, "T", 0, 100, size=500)
    crash(store)
    last = results[-1]
    path, pos = segment_file(store, last.physical_offset)
    patch_file(path, pos + cut_into, bytes(last.size - cut_into))  # the tail of the last write never landed

    store = open_store(config)
    assert store.max_physical_offset == results[-2].end_offset
    assert store.get_max_offset("T", 0) == 99
    assert offsets(read_all(store, "T", 0)) == [(r.queue_offset, r.physical_offset) for r in results[:-1]]
    (again,) = store.put_messages([message("T", 0, 100)])
    assert (again.queue_offset, again.physical_offset) == (99, results[-2].end_offset)
    crash(store)
    assert len(read_all(open_store(config), "T", 0)) == 100


def test_a_bit_flip_in_a_body_loses_only_that_record_and_keeps_later_offsets(tmp_path):
    config = make_config(tmp_path)
    store = open_store(config)
    sent = fill(store, queues=2, count=400)
    crash(store)
    victim = sent[0][50]
    path, pos = segment_file(store, victim.physical_offset)
    flip_bit(path, pos + victim.size - 150, bit=3)

    store = open_store(config)
    assert store.max_physical_offset == sent[1][-1].end_offset  # nothing after it was cut
    expected = [(r.queue_offset, r.physical_offset) for r in sent[0] if r is not victim]
    assert offsets(read_all(store, "T", 0)) == expected
    assert offsets(read_all(store, "T", 1)) == [(r.queue_offset, r.physical_offset) for r in sent[1]]
    assert store.get_max_offset("T", 0) == 200
    at_hole = store.get_messages("T", 0, 50, 1)
    assert (at_hole.status, at_hole.next_begin_offset) == (GetStatus.FOUND, 52)
    assert decode_record(bytes(at_hole.records[0])).queue_offset == 51
    assert store.read_record(victim.physical_offset) is None
    assert store.query_by_key("T", "key-100") == []  # message 100 is queue 0's 50th
    assert len(store.query_by_key("T", "key-102")) == 1


def test_random_garbage_after_the_last_record_is_discarded(tmp_path):
    config = make_config(tmp_path)
    store = open_store(config)
    results = put(store, "T", 0, 50)
    crash(store)
    end = results[-1].end_offset
    path, pos = segment_file(store, end)
    garbage = random.Random(1).randbytes(5000)
    assert garbage[4:8] not in (b"GRAY", b"\xbb\xcc\xdd\xee")
    patch_file(path, pos, garbage)

    store = open_store(config)
    assert store.max_physical_offset == end
    assert len(read_all(store, "T", 0)) == 50
    (r,) = store.put_messages([message("T", 0, 50, size=20)])
    assert r.queue_offset == 50
    with open(path, "rb") as f:  # the garbage is gone, not just overwritten at the head
        f.seek(pos + r.size)
        assert f.read(5000 - r.size) == bytes(5000 - r.size)


@pytest.mark.parametrize("how", ["clean", "crash"])
def test_a_deleted_consume_queue_directory_is_rebuilt_completely(tmp_path, how):
    config = make_config(tmp_path)
    store = open_store(config)
    sent = fill(store, count=1500)
    assert len(store.commitlog.segments) >= 6  # more than recovery's tail scan covers
    before = offsets(read_all(store, "T", 1))
    if how == "clean":
        stop(store)
    else:
        run(store.flush())
        run(store.write_checkpoint())
        crash(store)
    shutil.rmtree(tmp_path / "consumequeue" / "T" / "1")

    store = open_store(config)
    assert offsets(read_all(store, "T", 1)) == before
    assert store.get_max_offset("T", 1) == len(sent[1])
    assert [m.queue_offset for m in read_all(store, "T", 1, frozenset({"even"}))] == [
        m[0] for m in before if m[0] % 2 == 1  # queue 1 holds n = 3k + 1: even n at odd queue offsets
    ]


def test_a_rebuilt_queue_keeps_a_hole_for_a_damaged_record(tmp_path):
    config = make_config(tmp_path)
    store = open_store(config)
    results = put(store, "T", 0, 100)
    stop(store)
    victim = results[40]
    path, pos = segment_file(store, victim.physical_offset)
    flip_bit(path, pos + victim.size - 1)
    shutil.rmtree(tmp_path / "consumequeue")

    store = open_store(config)
    assert store.get_max_offset("T", 0) == 100
    assert [m.queue_offset for m in read_all(store, "T", 0)] == [n for n in range(100) if n != 40]


def test_a_consume_queue_longer_than_the_log_is_truncated_after_a_crash(tmp_path):
    config = make_config(tmp_path)
    store = open_store(config)
    sent = fill(store, queues=2, count=300)
    crash(store)
    cut = sent[0][120]  # the log loses everything from here on
    path, pos = segment_file(store, cut.physical_offset)
    patch_file(path, pos, bytes(config.segment_size - pos))
    for later in sorted((tmp_path / "commitlog").iterdir())[cut.physical_offset // config.segment_size + 1 :]:
        patch_file(later, 0, bytes(config.segment_size))

    store = open_store(config)
    assert store.max_physical_offset == cut.physical_offset
    assert store.get_max_offset("T", 0) == 120
    assert store.get_max_offset("T", 1) == 120  # queue 1's 120th message came after queue 0's
    assert len(store.commitlog.segments) == cut.physical_offset // config.segment_size + 1
    assert store.put_messages([message("T", 1, 0)])[0].queue_offset == 120


def test_consume_queue_units_past_the_log_end_are_dropped_after_a_clean_stop(tmp_path):
    config = make_config(tmp_path)
    store = open_store(config)
    results = put(store, "T", 0, 10)
    end = store.max_physical_offset
    stop(store)
    bogus = b"".join(UNIT.pack(end + 100 * i, 150, 0) for i in range(3))
    patch_file(tmp_path / "consumequeue" / "T" / "0" / f"{0:020d}", 10 * UNIT.size, bogus)

    store = open_store(config)
    assert store.get_max_offset("T", 0) == 10
    assert offsets(read_all(store, "T", 0)) == [(r.queue_offset, r.physical_offset) for r in results]
    assert store.put_messages([message("T", 0, 10)])[0].queue_offset == 10


def test_recovery_rebuilds_missing_index_entries(tmp_path):
    config = make_config(tmp_path)
    store = open_store(config)
    put(store, "T", 0, 20, keys=("order-7",))
    crash(store)
    for f in (tmp_path / "index").iterdir():
        f.unlink()
    store = open_store(config)
    assert len(store.query_by_key("T", "order-7", max_num=100)) == 20


def test_an_unreadable_checkpoint_falls_back_to_a_full_scan(tmp_path):
    config = make_config(tmp_path)
    store = open_store(config)
    fill(store, queues=1, count=200)
    stop(store)
    (tmp_path / "checkpoint").write_text("{torn")
    shutil.rmtree(tmp_path / "consumequeue")
    store = open_store(config)
    assert store.get_max_offset("T", 0) == 200


def test_segment_names_must_follow_each_other(tmp_path):
    config = make_config(tmp_path)
    store = open_store(config)
    put(store, "T", 0, 500, size=500)
    stop(store)
    segments = sorted((tmp_path / "commitlog").iterdir())
    segments[1].unlink()
    with pytest.raises(ValueError, match="segment"):
        open_store(config)


def test_queue_units_are_20_bytes():
    assert UNIT.size == 20 and struct.calcsize(">qiq") == 20
