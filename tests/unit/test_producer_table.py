"""The broker's table of idempotent producers: what a retried sequence gets, what is kept, what leaves, and
the rebuild from the records of a store."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from graymq.broker_ext.processors.producer_table import (
    FORGOTTEN,
    ProducerTable,
    Stored,
    parse_sequence_property,
    sequence_property,
)
from graymq.broker_ext.processors.send_processor import to_put_message
from graymq.broker_ext.store import MessageStore, PutMessage, StoreConfig
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.constants import PROPERTY_PRODUCER_SEQUENCE
from graymq.protocol.record import make_properties

pytestmark = pytest.mark.unit

PID = 0xA1B2C3D4E5F60718


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def stored(sequence: int, queue_offset: int | None = None) -> Stored:
    offset = sequence * 10 if queue_offset is None else queue_offset
    return Stored(sequence, offset, offset * 100, offset * 100 + 100, 1, f"ID{sequence}")


def test_a_stored_sequence_is_found_with_its_result_and_the_next_one_is_new() -> None:
    table = ProducerTable()
    table.record(PID, "T", 3, stored(0))
    assert table.lookup(PID, "T", 3, 0) == stored(0)
    assert table.lookup(PID, "T", 3, 1) is None
    assert table.lookup(PID, "T", 4, 0) is None  # per queue
    assert table.lookup(PID + 1, "T", 3, 0) is None  # per producer
    assert table.lookup(PID, "U", 3, 0) is None  # per topic


def test_only_the_last_few_are_kept_and_older_ones_are_forgotten_duplicates() -> None:
    table = ProducerTable(kept=5)
    for sequence in range(10):
        table.record(PID, "T", 0, stored(sequence))
    assert [table.lookup(PID, "T", 0, s) for s in range(5, 10)] == [stored(s) for s in range(5, 10)]
    assert all(table.lookup(PID, "T", 0, s) is FORGOTTEN for s in range(5))
    assert table.lookup(PID, "T", 0, 10) is None


def test_a_gap_filled_late_is_new_until_more_than_the_kept_stored_above_it() -> None:
    """Sequences may skip (a request that never left) and arrive out of order (retries after a lost
    connection): one above the highest dropped and not kept was never stored."""
    table = ProducerTable(kept=3)
    for sequence in (0, 1, 3, 4):  # 2 missing
        table.record(PID, "T", 0, stored(sequence))
    assert table.lookup(PID, "T", 0, 2) is None  # 0 dropped, floor 0: 2 was never stored
    table.record(PID, "T", 0, stored(2))
    assert [table.lookup(PID, "T", 0, s) for s in (2, 3, 4)] == [stored(2), stored(3), stored(4)]
    assert table.lookup(PID, "T", 0, 1) is FORGOTTEN
    table.record(PID, "T", 0, stored(6))
    assert table.lookup(PID, "T", 0, 5) is None  # floor 2 now, 5 above it
    for sequence in (7, 8, 9):
        table.record(PID, "T", 0, stored(sequence))
    assert table.lookup(PID, "T", 0, 5) is FORGOTTEN  # three stored above it: no longer decidable


def test_entries_unused_for_the_window_leave_and_the_total_is_capped_least_recently_used_first() -> None:
    clock = Clock()
    table = ProducerTable(window_s=60, max_entries=3, clock=clock)
    table.record(PID, "T", 0, stored(0))
    clock.now += 30
    table.record(PID, "T", 1, stored(0))
    clock.now += 31  # queue 0 idle for 61 s, queue 1 for 31 s
    table.record(PID, "T", 2, stored(0))
    assert table.lookup(PID, "T", 0, 0) is None and table.lookup(PID, "T", 1, 0) == stored(0)
    for queue_id in (3, 4):  # cap 3: queue 1, the least recently used, leaves
        table.record(PID, "T", queue_id, stored(0))
    assert len(table) == 3
    assert table.lookup(PID, "T", 1, 0) is None
    assert all(table.lookup(PID, "T", q, 0) == stored(0) for q in (2, 3, 4))


def test_the_sequence_property_round_trips_and_garbage_is_ignored() -> None:
    assert parse_sequence_property(sequence_property(PID, 42, 64)) == (PID, 42, 64)
    for bad in ("", "x:1:1", "1:2", "1:2:3:4", "0:1:1", "1:-1:1", "1:1:0", "zz:1:1"):
        assert parse_sequence_property(bad) is None


def test_a_sequence_property_a_client_hands_over_is_not_stored() -> None:
    """Only the broker writes it (the rebuild trusts it): a consumed message forwarded as is carries one."""
    forwarded = pb.Message(topic="T", body=b"x", msg_id="ID", properties={
        PROPERTY_PRODUCER_SEQUENCE: sequence_property(PID, 3, 1), "own": "kept"})
    assert to_put_message(forwarded, 0, "PG").properties == {"own": "kept", "PGROUP": "PG", "UNIQ_KEY": "ID"}


# ---------------------------------------------------------------------------------- rebuild from a store

NOW_MS = 10_000_000


def request(topic: str, queue_id: int, sequence: int, messages: int, *, reconsume_times: int = 0,
            producer_id: int = PID) -> list[PutMessage]:
    puts = [PutMessage(topic, queue_id, b"body", make_properties(msg_id=f"{topic}-{queue_id}-{sequence}-{i}"),
                       reconsume_times=reconsume_times) for i in range(messages)]
    puts[0].properties[PROPERTY_PRODUCER_SEQUENCE] = sequence_property(producer_id, sequence, messages)
    return puts


def test_rebuild_enters_the_requests_stored_within_the_window_and_only_those(tmp_path: Path) -> None:
    clock_ms = [NOW_MS - 400_000]
    store = MessageStore(StoreConfig(store_dir=tmp_path, segment_size=1 << 20, cq_units_per_file=64),
                         clock_ms=lambda: clock_ms[0])
    store.load()
    try:
        store.put_messages(request("T", 2, 0, 1))  # 400 s ago: outside a 300 s window
        clock_ms[0] = NOW_MS - 100_000
        store.put_messages(request("T", 0, 0, 1))
        store.put_messages(request("T", 0, 1, 1))
        (batch, *_) = store.put_messages(request("T", 1, 7, 3))
        store.put_messages([PutMessage("T", 0, b"old client", make_properties(msg_id="plain"))])
        store.put_messages(request("%RETRY%g", 0, 1, 1, reconsume_times=1, producer_id=PID + 1))  # a copy
        last = [store.put_messages(request("T", 0, s, 1))[0] for s in range(2, 9)]  # 1 and 2 drop out of 5 kept
        table = ProducerTable(window_s=300, kept=5)
        result = table.rebuild(store, now_ms=NOW_MS)
    finally:
        asyncio.run(store.stop())
    assert table.lookup(PID, "T", 2, 0) is None  # outside the window: not entered
    assert table.lookup(PID, "T", 0, 1) is FORGOTTEN
    eighth = last[-1]
    assert table.lookup(PID, "T", 0, 8) == Stored(8, eighth.queue_offset, eighth.physical_offset, eighth.end_offset,
                                                 1, "T-0-8-0")
    assert table.lookup(PID, "T", 1, 7) == Stored(7, 0, batch.physical_offset, batch.end_offset, 3, "T-1-7-0")
    assert table.lookup(PID + 1, "%RETRY%g", 0, 1) is None  # copies carry the property but are not requests
    assert (result.requests, result.entries) == (10, 2)
    # every record of the window is read once (queue 0: 10, the copy: 1), but of the batch only its first
    assert result.records == 10 + 1 + 1


def test_a_spark_sink_batch_replayed_minutes_later_is_recognised_within_the_default_window() -> None:
    """The sink numbers a task's requests ``batch id << 24 | n`` under one producer id per query and partition;
    a micro-batch run again after a driver restart repeats them, however many were stored the first time."""
    from graymq.broker_ext.processors.producer_table import WINDOW_S
    from graymq.client.spark.sink_task import TaskIdentity

    clock = Clock()
    table = ProducerTable(clock=clock)
    earlier, failed = TaskIdentity("query", 6, 1), TaskIdentity("query", 7, 1)
    assert earlier.producer_id == failed.producer_id, "one producer id per query and partition"
    table.record(failed.producer_id, "T", 2, stored(earlier.sequence(0)))
    first_run = [failed.sequence(n) for n in range(8)]  # 8 requests stored, then the driver died
    for sequence in first_run:
        table.record(failed.producer_id, "T", 2, stored(sequence, 7))
    clock.now += WINDOW_S - 60  # the restart took minutes
    table.record(PID, "OTHER", 0, stored(0))  # a new entry: idle ones are expired now
    assert all(table.lookup(failed.producer_id, "T", 2, s) is not None for s in first_run), "replays recognised"
    assert table.lookup(failed.producer_id, "T", 2, failed.sequence(8)) is None, "the rest is new"
    clock.now += 61
    table.record(PID, "OTHER", 1, stored(0))
    assert table.lookup(failed.producer_id, "T", 2, first_run[0]) is None, "beyond the window: stored again"


def test_rebuild_forgets_what_the_log_no_longer_holds(tmp_path: Path) -> None:
    """A replica that stored a request as leader and then moved it aside (another replica's log won) must not
    answer its retry as stored: after the rebuild the table is the log's."""
    store = MessageStore(StoreConfig(store_dir=tmp_path, segment_size=1 << 20, cq_units_per_file=64),
                         clock_ms=lambda: NOW_MS)
    store.load()
    try:
        kept = store.put_messages(request("T", 0, 0, 1))[0]
        table = ProducerTable(window_s=300, kept=5)
        table.record(PID, "T", 0, Stored(0, 5, 999, 1099, 1, "elsewhere"))  # where it stood before, now moved aside
        table.record(PID, "T", 0, stored(1))  # and one the log lost
        table.rebuild(store, now_ms=NOW_MS)
    finally:
        asyncio.run(store.stop())
    assert table.lookup(PID, "T", 0, 0) == Stored(0, 0, kept.physical_offset, kept.end_offset, 1, "T-0-0-0")
    assert table.lookup(PID, "T", 0, 1) is None
