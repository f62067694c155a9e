"""ProcessQueue's commit offset stays the lowest unconsumed offset whatever order batches finish in."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


def test_the_stop_names_the_message_read_just_before_it_and_only_that_one():
    messages = list(iter_records(b"".join(
        encode_record(topic=b"T", body=b"x", queue_id=0, queue_offset=o, physical_offset=o * 100,
                      properties=encode_properties(make_properties(msg_id=f"M{o}"))) for o in (0, 1, 2, 5)),
        broker_name="a"))
    pq = ProcessQueue(MessageQueue("T", "a", 0), "x", pull_offset=0)
    pq.add([0, 1, 2, 5], 6, max_in_flight=100, messages=messages)
    pq.done([0, 2], max_in_flight=100)
    assert pq.stop() == Stop(1, "M0")
    pq.done([1], max_in_flight=100)
    assert pq.stop() == Stop(5, None)  # 3 and 4 were not read (filtered): what lies there is unknown
    pq.done([5], max_in_flight=100)
    assert pq.stop() == Stop(6, "M5")
