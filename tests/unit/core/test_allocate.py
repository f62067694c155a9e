"""Allocation strategies: worked examples for every strategy, gray and normal sets, orphan policies."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graymq.client.message import MessageQueue
from graymq.core.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueGray,
    ConsumerView,
)
from graymq.core.queue_layout import gray_queue_ids, weighted_queue_ids
from graymq.protocol.errors import ConfigError

pytestmark = pytest.mark.unit

V1A, V1B = ConsumerView("v1a"), ConsumerView("v1b")
V2A, V2B = ConsumerView("v2a", gray=True), ConsumerView("v2b", gray=True)
CLIENTS = [V1A, V1B, V2A, V2B]


def queues(topic="TOPIC_V_ORDER", broker="broker-a", n=6):
    return [MessageQueue(topic, broker, q) for q in range(n)]


def layout(n=6, g=2):
    return lambda mq: mq.queue_id in gray_queue_ids(n, g)


def ids(mqs):
    return [(mq.broker_name, mq.queue_id) if mq.broker_name != "broker-a" else mq.queue_id for mq in mqs]


def allocation(strategy, clients, mqs):
    return {c.client_id: ids(strategy.allocate("G", c.client_id, mqs, clients)) for c in clients}


def test_averagely_worked_example():
    s = AllocateMessageQueueAveragely()
    assert allocation(s, [V1A, V1B], queues(n=5)) == {"v1a": [0, 1, 2], "v1b": [3, 4]}


def test_circle_worked_example():
    s = AllocateMessageQueueAveragelyByCircle()
    assert allocation(s, [V1A, V1B], queues(n=5)) == {"v1a": [0, 2, 4], "v1b": [1, 3]}


def test_gray_six_queues_two_gray_v2_get_first_and_last():
    s = AllocateMessageQueueGray(layout())
    assert allocation(s, CLIENTS, queues()) == {"v1a": [1, 2], "v1b": [3, 4], "v2a": [0], "v2b": [5]}


def test_no_gray_client_hold_leaves_gray_queues_unassigned():
    s = AllocateMessageQueueGray(layout(), orphan_policy="hold")
    assert allocation(s, [V1A, V1B], queues()) == {"v1a": [1, 2], "v1b": [3, 4]}


def test_no_gray_client_adopt_gives_gray_queues_to_normal_clients():
    s = AllocateMessageQueueGray(layout(), orphan_policy="adopt")
    got = allocation(s, [V1A, V1B], queues())
    assert got == {"v1a": [0, 1, 2], "v1b": [3, 4, 5]}
    assert s.adopted(MessageQueue("TOPIC_V_ORDER", "broker-a", 0))


def test_adopt_does_nothing_while_a_gray_client_exists():
    s = AllocateMessageQueueGray(layout(), orphan_policy="adopt")
    assert allocation(s, CLIENTS, queues())["v1a"] == [1, 2]


def test_switch_off_makes_every_queue_normal():
    s = AllocateMessageQueueGray(layout(), gray_switch=False)
    assert allocation(s, CLIENTS, queues()) == {"v1a": [0, 1], "v1b": [2, 3], "v2a": [4], "v2b": [5]}


def test_more_clients_than_queues():
    s = AllocateMessageQueueGray(layout())
    many = [ConsumerView(f"v2-{i}", gray=True) for i in range(4)] + [ConsumerView(f"v1-{i}") for i in range(6)]
    got = allocation(s, many, queues())
    assert got["v2-0"] == [0] and got["v2-1"] == [5] and got["v2-2"] == [] and got["v2-3"] == []
    assert [got[f"v1-{i}"] for i in range(6)] == [[1], [2], [3], [4], [], []]


def test_several_brokers_each_broker_has_its_own_gray_queues():
    mqs = queues(broker="broker-a") + queues(broker="broker-b")
    s = AllocateMessageQueueGray(layout())
    got = allocation(s, CLIENTS, mqs)
    assert got["v2a"] == [0, 5] and got["v2b"] == [("broker-b", 0), ("broker-b", 5)]
    assert got["v1a"] == [1, 2, 3, 4]
    assert got["v1b"] == [("broker-b", q) for q in (1, 2, 3, 4)]


def test_unknown_client_gets_nothing_and_bad_policy_is_refused():
    s = AllocateMessageQueueGray(layout())
    assert s.allocate("G", "stranger", queues(), CLIENTS) == []
    with pytest.raises(ConfigError):
        AllocateMessageQueueGray(layout(), orphan_policy="steal")  # type: ignore[arg-type]


@given(n=st.integers(1, 24), g_frac=st.floats(0, 1), n_gray=st.integers(0, 5), n_normal=st.integers(0, 5),
       adopt=st.booleans())
def test_every_queue_is_assigned_at_most_once_and_sides_never_mix(n, g_frac, n_gray, n_normal, adopt):
    g = int(n * g_frac)
    clients = [ConsumerView(f"g{i}", True) for i in range(n_gray)] + [ConsumerView(f"n{i}") for i in range(n_normal)]
    s = AllocateMessageQueueGray(layout(n, g), orphan_policy="adopt" if adopt else "hold")
    mqs = queues(n=n)
    owners: dict[int, str] = {}
    for c in clients:
        for mq in s.allocate("G", c.client_id, mqs, clients):
            assert mq.queue_id not in owners
            owners[mq.queue_id] = c.client_id
            gray_q = mq.queue_id in gray_queue_ids(n, g)
            if c.gray:
                assert gray_q
            elif gray_q:
                assert adopt and n_gray == 0
    normal_ids = set(range(n)) - set(gray_queue_ids(n, g))
    if n_normal:
        assert normal_ids <= set(owners)
    if n_gray:
        assert set(gray_queue_ids(n, g)) <= set(owners)


def weighted(weight, n=6, g=2):
    return lambda mq: mq.queue_id in weighted_queue_ids(n, g, weight)


def test_adopted_queues_are_balanced_with_the_normal_ones():
    v1c = ConsumerView("v1c")
    s = AllocateMessageQueueGray(layout(), orphan_policy="adopt")
    got = allocation(s, [V1A, V1B, v1c], queues())
    assert got == {"v1a": [0, 1], "v1b": [2, 3], "v1c": [4, 5]}


def test_weight_50_gives_the_gray_side_half_of_the_normal_queues():
    s = AllocateMessageQueueGray(layout(8, 2), is_weighted=weighted(50, 8, 2))
    got = allocation(s, CLIENTS, queues(n=8))  # gray 0 and 7; normal 1..6, weighted 2 4 6
    assert got == {"v2a": [0, 2, 4], "v2b": [6, 7], "v1a": [1, 3], "v1b": [5]}


def test_weight_has_no_effect_without_a_gray_client():
    s = AllocateMessageQueueGray(layout(8, 2), is_weighted=weighted(50, 8, 2))
    assert allocation(s, [V1A, V1B], queues(n=8)) == {"v1a": [1, 2, 3], "v1b": [4, 5, 6]}


def test_a_consumer_only_canary_on_a_topic_without_gray_queues():
    s = AllocateMessageQueueGray(layout(6, 0), is_weighted=weighted(50, 6, 0))
    assert allocation(s, [V1A, V2A], queues()) == {"v1a": [0, 2, 4], "v2a": [1, 3, 5]}


@given(n=st.integers(1, 24), g=st.integers(0, 24), weight=st.integers(0, 100), normal=st.integers(1, 5),
       gray=st.integers(0, 5), adopt=st.booleans())
def test_every_queue_once_and_totals_per_side_within_one(n, g, weight, normal, gray, adopt):
    g = min(g, n)
    clients = [ConsumerView(f"n{i}") for i in range(normal)] + [ConsumerView(f"g{i}", True) for i in range(gray)]
    s = AllocateMessageQueueGray(layout(n, g), orphan_policy="adopt" if adopt else "hold",
                                 is_weighted=weighted(weight, n, g))
    got = allocation(s, clients, queues(n=n))
    held = [q for qs in got.values() for q in qs]
    assert len(held) == len(set(held))
    if gray or adopt:
        assert sorted(held) == list(range(n))
    for side in (True, False):
        sizes = [len(got[c.client_id]) for c in clients if c.gray == side]
        assert not sizes or max(sizes) - min(sizes) <= 1
