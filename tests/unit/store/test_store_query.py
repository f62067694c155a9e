"""Lookups: by key and msg id through the key index, and queue offsets by store time."""

from __future__ import annotations

import pytest
from storekit import crash, flip_bit, make_config, message, open_store, segment_file, stop

from graymq.protocol.record import decode_record

pytestmark = pytest.mark.unit


class Clock:
    """A settable millisecond clock for store timestamps."""

    def __init__(self, now: int = 1_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def test_query_by_key_and_by_msg_id_within_a_topic_newest_first(tmp_path):
    clock = Clock()
    store = open_store(make_config(tmp_path), clock_ms=clock)
    for n in range(300):
        clock.now = 1_000 + n
        keys = ("order-1", f"user-{n % 7}") if n % 10 == 0 else (f"other-{n}",)
        store.put_messages([message("Orders", n % 3, n, keys=keys), message("Audit", 0, n, keys=("order-1",))])
    found = [decode_record(r) for r in store.query_by_key("Orders", "order-1", max_num=100)]
    assert [int(m.msg_id.rsplit("-", 1)[1]) for m in found] == list(range(290, -1, -10))
    assert all(m.topic == "Orders" and "order-1" in m.keys for m in found)
    assert len(store.query_by_key("Orders", "order-1", max_num=4)) == 4
    window = store.query_by_key("Orders", "order-1", begin_ms=1_100, end_ms=1_200)
    assert [decode_record(r).born_timestamp - 1_000 for r in window] == [200, 190, 180, 170, 160, 150, 140, 130, 120,
                                                                          110, 100]
    (by_id,) = store.query_by_key("Orders", "Orders-2-41")
    assert decode_record(by_id).body == message("Orders", 2, 41).body
    assert store.query_by_key("Orders", "nobody") == []
    assert store.query_by_key("Nowhere", "order-1") == []

    stop(store)
    store = open_store(make_config(tmp_path))
    assert len(store.query_by_key("Audit", "order-1", max_num=1000)) == 300


def test_offset_by_time_is_the_first_message_stored_at_or_after_it(tmp_path):
    clock = Clock()
    store = open_store(make_config(tmp_path, cq_units_per_file=16), clock_ms=clock)
    for second in (1, 2, 3):
        clock.now = second * 1_000
        store.put_messages([message("T", 0, n) for n in range(10)])
    assert [store.get_offset_by_time("T", 0, ts) for ts in (0, 1_000, 1_001, 2_000, 2_500, 3_000, 3_001)] == [
        0, 0, 10, 10, 20, 20, 30,
    ]
    assert store.get_offset_by_time("Nope", 0, 5) == 0


def test_offset_by_time_steps_over_a_damaged_message(tmp_path):
    clock = Clock()
    config = make_config(tmp_path)
    store = open_store(config, clock_ms=clock)
    results = []
    for second in (1, 2, 3):
        clock.now = second * 1_000
        results += store.put_messages([message("T", 0, n) for n in range(10)])
    crash(store)
    victim = results[10]
    path, pos = segment_file(store, victim.physical_offset)
    flip_bit(path, pos + victim.size - 1)
    store = open_store(config)
    assert store.get_offset_by_time("T", 0, 1_500) == 10  # the hole at 10 reads as the next message's time
    assert store.get_offset_by_time("T", 0, 2_000) == 10


def test_store_timestamps_never_go_backwards(tmp_path):
    clock = Clock(5_000)
    config = make_config(tmp_path)
    store = open_store(config, clock_ms=clock)
    first = store.put_messages([message("T", 0, 0)])[0]
    clock.now = 4_000  # the wall clock stepped back
    second = store.put_messages([message("T", 0, 1)])[0]
    assert second.store_timestamp == first.store_timestamp == 5_000
    stop(store)
    store = open_store(config, clock_ms=clock)
    assert store.put_messages([message("T", 0, 2)])[0].store_timestamp >= 5_000
