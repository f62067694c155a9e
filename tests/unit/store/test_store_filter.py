"""Tag filtering on pull: tag hash in the unit first, then the exact TAGS property; offsets always advance."""

from __future__ import annotations

import pytest
from storekit import make_config, message, open_store, put, read_all

from graymq.broker_ext.store import GetStatus
from graymq.broker_ext.store.message_store import MAX_SCAN_UNITS
from graymq.protocol.constants import tag_hash
from graymq.protocol.record import decode_record

pytestmark = pytest.mark.unit

# Two tags with the same stored hash (found by search): only the exact TAGS check tells them apart.
COLLIDING = ("tag29685295", "tag32060020")


def test_a_tag_filter_returns_only_matching_messages_and_skips_the_rest(tmp_path):
    store = open_store(make_config(tmp_path))
    tags = ["A", "B", "C"]
    for n in range(90):
        store.put_messages([message("T", 0, n, tags=tags[n % 3])])
    result = store.get_messages("T", 0, 0, 10, frozenset({"A"}))
    assert result.status is GetStatus.FOUND
    assert [r.queue_offset for r in map(_decode, result.records)] == list(range(0, 30, 3))
    assert result.next_begin_offset == 28  # just past the 10th "A", the "B"/"C" before it consumed
    both = read_all(store, "T", 0, frozenset({"A", "C"}))
    assert [m.queue_offset for m in both] == [n for n in range(90) if n % 3 != 1]
    assert all(m.tags in ("A", "C") for m in both)
    assert len(read_all(store, "T", 0)) == 90


def test_tags_with_colliding_hashes_are_told_apart_exactly(tmp_path):
    assert tag_hash(COLLIDING[0]) == tag_hash(COLLIDING[1])
    store = open_store(make_config(tmp_path))
    for n in range(40):
        store.put_messages([message("T", 0, n, tags=COLLIDING[n % 2])])
    got = read_all(store, "T", 0, frozenset({COLLIDING[1]}))
    assert [m.queue_offset for m in got] == list(range(1, 40, 2))
    assert {m.tags for m in got} == {COLLIDING[1]}


def test_no_matched_msg_moves_next_begin_offset_past_the_scanned_units(tmp_path):
    store = open_store(make_config(tmp_path))
    put(store, "T", 0, 50, tags="B")
    result = store.get_messages("T", 0, 0, 32, frozenset({"A"}))
    assert (result.status, result.next_begin_offset, result.records) == (GetStatus.NO_MATCHED_MSG, 50, [])
    assert store.get_messages("T", 0, 50, 32, frozenset({"A"})).status is GetStatus.NO_NEW_MSG


def test_a_filtered_pull_scans_a_bounded_number_of_units(tmp_path):
    store = open_store(make_config(tmp_path, segment_size=1 << 20))
    for start in range(0, MAX_SCAN_UNITS + 100, 100):
        store.put_messages([message("T", 0, n, size=10, tags="B") for n in range(start, start + 100)])
    store.put_messages([message("T", 0, MAX_SCAN_UNITS + 100, tags="A")])
    first = store.get_messages("T", 0, 0, 32, frozenset({"A"}))
    assert (first.status, first.next_begin_offset) == (GetStatus.NO_MATCHED_MSG, MAX_SCAN_UNITS)
    second = store.get_messages("T", 0, first.next_begin_offset, 32, frozenset({"A"}))
    assert second.status is GetStatus.FOUND
    assert [_decode(r).queue_offset for r in second.records] == [MAX_SCAN_UNITS + 100]
    assert second.next_begin_offset == MAX_SCAN_UNITS + 101


@pytest.mark.parametrize(("offset", "corrected"), [(-1, 0), (11, 10), (1000, 10)])
def test_an_offset_outside_the_queue_is_illegal_and_corrected(tmp_path, offset, corrected):
    store = open_store(make_config(tmp_path))
    put(store, "T", 0, 10)
    result = store.get_messages("T", 0, offset, 32)
    assert (result.status, result.next_begin_offset, result.records) == (GetStatus.OFFSET_ILLEGAL, corrected, [])
    assert (result.min_offset, result.max_offset) == (0, 10)


def _decode(record):
    return decode_record(bytes(record))
