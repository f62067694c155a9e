"""ProcessQueue's commit offset stays the lowest unconsumed offset whatever order batches finish in."""

from __future__ import annotations

import doctest

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graymq.client.consumer import process_queue
from graymq.client.consumer.process_queue import ProcessQueue, Stop
from graymq.client.message import MessageQueue
from graymq.protocol.record import encode_properties, encode_record, iter_records, make_properties

pytestmark = pytest.mark.unit


@settings(max_examples=200, deadline=None)
@given(data=st.data(), pulls=st.lists(st.integers(0, 6), min_size=1, max_size=12))
def test_commit_offset_is_the_lowest_in_flight_offset_for_any_completion_order(data, pulls):
    pq = ProcessQueue(MessageQueue("T", "a", 0), "x", pull_offset=0)
    next_offset = 0
    for size in pulls:
        offsets = list(range(next_offset, next_offset + size))
        next_offset += size
        pq.add(offsets, next_offset, max_in_flight=1000)
        assert pq.commit_offset() == (min(pq.in_flight) if pq.in_flight else next_offset)
        finished = data.draw(st.lists(st.sampled_from(sorted(pq.in_flight)), unique=True) if pq.in_flight
                             else st.just([]))
        pq.done(finished, max_in_flight=1000)
        assert pq.commit_offset() == (min(pq.in_flight) if pq.in_flight else next_offset)


def test_rewind_pulls_again_from_the_commit_offset_and_frees_the_space():
    pq = ProcessQueue(MessageQueue("T", "a", 0), "x", pull_offset=0)
    pq.add([0, 1, 2, 3], 4, max_in_flight=3)
    pq.done([0], max_in_flight=3)
    assert not pq.space.is_set()
    pq.rewind()
    assert (pq.pull_offset, pq.commit_offset(), pq.in_flight) == (1, 1, set())
    assert pq.space.is_set()
    pq.done([2], max_in_flight=3)  # a batch of the abandoned pull finishing late changes nothing
    assert pq.commit_offset() == 1


def test_the_parted_at_examples() -> None:
    assert doctest.testmod(process_queue).failed == 0


def test_the_stop_lists_what_was_consumed_below_it_as_far_as_it_is_known():
    messages = list(iter_records(b"".join(
        encode_record(topic=b"T", body=b"x", queue_id=0, queue_offset=o, physical_offset=o * 100,
                      properties=encode_properties(make_properties(msg_id=f"M{o}"))) for o in (3, 4, 5, 8)),
        broker_name="a"))
    pq = ProcessQueue(MessageQueue("T", "a", 0), "x", pull_offset=3)
    pq.add([3, 4, 5, 8], 9, max_in_flight=100, messages=messages)
    pq.done([3, 5], max_in_flight=100)
    assert pq.stop() == Stop(4, ((3, "M3"),), 3)
    pq.done([4, 8], max_in_flight=100)
    assert pq.stop() == Stop(9, ((3, "M3"), (4, "M4"), (5, "M5"), (8, "M8")), 3)  # 6, 7: not for this client
    pq.add([9], 10, max_in_flight=100)  # its message not given: what was consumed up to 9 is not known
    pq.done([9], max_in_flight=100)
    assert pq.stop() == Stop(10, (), 10)


def test_only_the_last_messages_consumed_are_kept_and_the_stop_says_from_where():
    pq = ProcessQueue(MessageQueue("T", "a", 0), "x", pull_offset=0)
    total = process_queue.READ_KEPT + 5
    messages = list(iter_records(b"".join(
        encode_record(topic=b"T", body=b"x", queue_id=0, queue_offset=o, physical_offset=o * 100,
                      properties=encode_properties(make_properties(msg_id=f"M{o}"))) for o in range(total)),
        broker_name="a"))
    pq.add(list(range(total)), total, max_in_flight=10 * total, messages=messages)
    pq.done(list(range(total)), max_in_flight=10 * total)
    stop = pq.stop()
    assert (stop.offset, stop.read_from, stop.read[0], len(stop.read)) == (total, 5, (5, "M5"), total - 5)
