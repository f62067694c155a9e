"""Queue selection inside the gray/normal set, sharding keys, broker rotation; offsets of a process queue."""

from __future__ import annotations

from collections import Counter

import pytest

from graymq.client.consumer.process_queue import ProcessQueue
from graymq.client.message import MessageQueue
from graymq.core.route import BrokerData, TopicRoute
from graymq.core.selector import GrayQueueSelector
from graymq.protocol.errors import NoPermissionError

pytestmark = pytest.mark.unit


def route(*brokers: tuple[str, int, int, int]) -> TopicRoute:
    return TopicRoute("T", tuple(BrokerData(name, f"127.0.0.1:{i}", n, g, perm)
                                 for i, (name, n, g, perm) in enumerate(brokers)))


def test_gray_messages_round_robin_over_gray_queues_of_every_broker():
    r = route(("a", 6, 2, 6), ("b", 6, 2, 6))
    s = GrayQueueSelector()
    picks = Counter((mq.broker_name, mq.queue_id) for mq in (s.select(r, True) for _ in range(400)))
    assert set(picks) == {("a", 0), ("a", 5), ("b", 0), ("b", 5)}
    assert max(picks.values()) - min(picks.values()) <= 1  # round robin


def test_normal_messages_use_only_the_middle_queues():
    s = GrayQueueSelector()
    picks = {s.select(route(("a", 6, 2, 6)), False).queue_id for _ in range(100)}
    assert picks == {1, 2, 3, 4}


def test_switch_off_uses_every_queue():
    s = GrayQueueSelector()
    assert {s.select(route(("a", 6, 2, 6)), True, gray_switch=False).queue_id for _ in range(100)} == set(range(6))


def test_sharding_key_is_stable_inside_its_set():
    s = GrayQueueSelector()
    r = route(("a", 8, 2, 6))
    assert len({s.select(r, False, sharding_key="order-42") for _ in range(20)}) == 1
    assert s.select(r, True, sharding_key="order-42").queue_id in (0, 7)


def test_retry_avoids_the_broker_that_failed():
    s = GrayQueueSelector()
    r = route(("a", 4, 2, 6), ("b", 4, 2, 6))
    assert all(s.select(r, False, last_broker="a").broker_name == "b" for _ in range(20))


def test_read_only_brokers_are_skipped_and_no_writable_queue_is_an_error():
    s = GrayQueueSelector()
    assert {s.select(route(("a", 4, 0, 4), ("b", 4, 0, 6)), False).broker_name for _ in range(20)} == {"b"}
    with pytest.raises(NoPermissionError):
        s.select(route(("a", 4, 0, 4)), False)


def test_gray_message_on_a_topic_without_gray_queues_falls_back_to_normal():
    s = GrayQueueSelector()
    assert {s.select(route(("a", 4, 0, 6)), True).queue_id for _ in range(20)} == {0, 1, 2, 3}


def test_commit_offset_is_the_lowest_unconsumed():
    pq = ProcessQueue(MessageQueue("T", "a", 0), "x", pull_offset=10)
    assert pq.commit_offset() == 10
    pq.add([10, 11, 12, 13], next_offset=14, max_in_flight=100)
    pq.done([10, 12, 13], max_in_flight=100)
    assert pq.commit_offset() == 11  # 11 still being consumed: restart re-delivers it (at-least-once)
    pq.done([11], max_in_flight=100)
    assert pq.commit_offset() == 14
    pq.advance(20)  # filtered messages still move the offset
    assert pq.commit_offset() == 20


def test_flow_control_blocks_pulling_when_too_much_is_in_flight():
    pq = ProcessQueue(MessageQueue("T", "a", 0), "x", pull_offset=0)
    pq.add(list(range(5)), 5, max_in_flight=5)
    assert not pq.space.is_set()
    pq.done([0], max_in_flight=5)
    assert pq.space.is_set()
