"""Appending and reading: segment rolls, contiguous batches, offsets, limits and refusals."""

from __future__ import annotations

import random

import pytest
from storekit import SEGMENT, body_for, flip_bit, make_config, message, open_store, put, read_all, segment_file

from graymq.broker_ext.store import GetStatus, PutMessage
from graymq.protocol.errors import MessageTooLargeError
from graymq.protocol.record import RECORD_HEADER, decode_record

pytestmark = pytest.mark.unit


def test_every_message_reads_back_with_its_offsets_across_segment_rolls(tmp_path):
    store = open_store(make_config(tmp_path))
    rng = random.Random(7)
    sent: dict[int, list] = {q: [] for q in range(4)}
    for n in range(3000):
        q = rng.randrange(4)
        (result,) = store.put_messages([message("TopicA", q, n, size=rng.randrange(20, 800))])
        assert result.queue_offset == len(sent[q])
        assert result.end_offset == result.physical_offset + result.size
        sent[q].append((n, result))
    assert store.stats.segments >= 5 and len(store.commitlog.segments) == store.stats.segments
    assert store.stats.put_count == 3000
    for q, expected in sent.items():
        got = read_all(store, "TopicA", q)
        assert [(m.queue_offset, m.commit_log_offset) for m in got] == [
            (r.queue_offset, r.physical_offset) for _, r in expected
        ]
        assert [m.body for m in got] == [
            body_for("TopicA", q, n, len(m.body)) for (n, _), m in zip(expected, got, strict=True)
        ]
        assert all(m.store_host == "127.0.0.1:10911" and m.born_host == "10.0.0.1:5000" for m in got)
        assert store.get_max_offset("TopicA", q) == len(expected)


def test_a_batch_is_contiguous_never_straddles_a_segment_and_numbers_each_queue(tmp_path):
    store = open_store(make_config(tmp_path))
    rng = random.Random(3)
    next_offset: dict[tuple[str, int], int] = {}
    expected: dict[tuple[str, int], list[bytes]] = {}
    for batch_no in range(300):
        batch = []
        for i in range(rng.randrange(1, 33)):
            key = (rng.choice(["Orders", "Payments"]), rng.randrange(3))
            batch.append(message(*key, batch_no * 100 + i, size=rng.randrange(10, 300)))
        results = store.put_messages(batch)
        first, last = results[0], results[-1]
        assert all(a.end_offset == b.physical_offset for a, b in zip(results, results[1:], strict=False))
        assert first.physical_offset // SEGMENT == (last.end_offset - 1) // SEGMENT
        assert len({r.store_timestamp for r in results}) == 1
        for m, r in zip(batch, results, strict=True):
            key = (m.topic, m.queue_id)
            assert r.queue_offset == next_offset.get(key, 0)
            next_offset[key] = r.queue_offset + 1
            expected.setdefault(key, []).append(m.body)
    assert store.stats.segments >= 5
    for (topic, q), bodies in expected.items():
        assert [m.body for m in read_all(store, topic, q)] == bodies
    assert store.queue_table() == {
        t: {q: n for (t2, q), n in next_offset.items() if t2 == t} for t in ("Orders", "Payments")
    }


def test_oversized_messages_and_batches_are_refused_without_writing(tmp_path):
    store = open_store(make_config(tmp_path, max_message_size=1 << 20))
    put(store, "T", 0, 3)
    before = (store.max_physical_offset, store.queue_table())
    with pytest.raises(MessageTooLargeError):
        store.put_messages([PutMessage("T", 0, b"x" * ((1 << 20) + 1), {})])
    with pytest.raises(MessageTooLargeError, match="segment"):
        store.put_messages([PutMessage("T", 0, b"x" * SEGMENT, {})])
    with pytest.raises(MessageTooLargeError, match="segment"):
        store.put_messages([PutMessage("T", 0, b"x" * (SEGMENT // 3), {}) for _ in range(4)])
    assert (store.max_physical_offset, store.queue_table()) == before
    assert store.put_messages([message("T", 0, 3)])[0].queue_offset == 3


@pytest.mark.parametrize(
    "bad",
    [
        PutMessage("bad topic!", 0, b"x", {}),
        PutMessage("", 0, b"x", {}),
        PutMessage("T", -1, b"x", {}),
        PutMessage("T", 70_000, b"x", {}),
        PutMessage("T", 0, b"x", {"k": "a\x01b"}),
        PutMessage("T", 0, b"x", {}, born_timestamp=-(2**64)),
    ],
)
def test_an_invalid_message_fails_the_whole_batch_and_nothing_is_written(tmp_path, bad):
    store = open_store(make_config(tmp_path))
    with pytest.raises(ValueError):
        store.put_messages([message("T", 1, 0), bad])
    assert store.max_physical_offset == 0
    assert store.queue_table() == {}
    assert store.get_messages("T", 1, 0, 10).status is GetStatus.NO_NEW_MSG


def test_unknown_queue_and_end_of_queue(tmp_path):
    store = open_store(make_config(tmp_path))
    assert store.get_messages("Nope", 0, 0, 10).status is GetStatus.NO_NEW_MSG
    illegal = store.get_messages("Nope", 0, 5, 10)
    assert (illegal.status, illegal.next_begin_offset) == (GetStatus.OFFSET_ILLEGAL, 0)
    put(store, "T", 0, 5)
    end = store.get_messages("T", 0, 5, 10)
    assert (end.status, end.next_begin_offset, end.min_offset, end.max_offset) == (GetStatus.NO_NEW_MSG, 5, 0, 5)
    with pytest.raises(ValueError):
        store.get_messages("T", 0, 0, 0)


def test_max_bytes_bounds_a_pull_but_always_returns_one_message(tmp_path):
    store = open_store(make_config(tmp_path))
    results = put(store, "T", 0, 10, size=1000)
    size = results[0].size
    two = store.get_messages("T", 0, 0, 32, max_bytes=2 * size + 10)
    assert (len(two.records), two.next_begin_offset) == (2, 2)
    one = store.get_messages("T", 0, 0, 32, max_bytes=10)
    assert (len(one.records), one.next_begin_offset) == (1, 1)
    assert isinstance(one.records[0], memoryview)  # zero-copy view of the segment


def test_read_record_returns_the_stored_bytes_and_none_when_damaged(tmp_path):
    store = open_store(make_config(tmp_path))
    results = put(store, "T", 0, 3)
    record = store.read_record(results[1].physical_offset)
    assert record is not None and len(record) == results[1].size
    assert decode_record(record).queue_offset == 1
    assert store.read_record(results[1].physical_offset + 1) is None
    assert store.read_record(store.max_physical_offset) is None
    path, pos = segment_file(store, results[1].physical_offset)
    flip_bit(path, pos + RECORD_HEADER.size + 3)
    assert store.read_record(results[1].physical_offset) is None


def test_reads_stop_before_the_first_message_ending_past_the_readable_end(tmp_path):
    """A sync leader's store serves consumers only what its in-sync followers stored (``readable_end``)."""
    store = open_store(make_config(tmp_path))
    results = store.put_messages([message("T", 0, n) for n in range(3)] + [message("T", 1, 9)])
    confirmed = results[1].end_offset
    store.readable_end = lambda: confirmed
    got = store.get_messages("T", 0, 0, 32)
    assert got.status is GetStatus.FOUND and len(got.records) == 2 and got.next_begin_offset == 2
    held_back = store.get_messages("T", 0, 2, 32)
    assert held_back.status is GetStatus.NO_NEW_MSG and held_back.next_begin_offset == 2 and not held_back.records
    assert store.get_messages("T", 1, 0, 32, frozenset({"x"})).status is GetStatus.NO_NEW_MSG  # filtered alike
    confirmed = results[-1].end_offset
    assert [len(store.get_messages("T", q, o, 32).records) for q, o in ((0, 2), (1, 0))] == [1, 1]
    assert store.get_max_offset_below("T", 0, confirmed) == 3
    confirmed = results[1].end_offset
    assert (store.get_max_offset_below("T", 0, confirmed), store.get_max_offset_below("T", 1, confirmed)) == (2, 0)
    assert store.get_max_offset("T", 0) == 3 == store.get_max_offset_below("T", 0, None)  # the queue itself
