"""Lanes in the pure core: slot layout, the lane of a queue in a route, the lane a send takes, lane-aware allocation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graymq.core.allocate import AllocateMessageQueueGray, ConsumerView
from graymq.core.gray_side import send_lane, send_side
from graymq.core.message_queue import MessageQueue
from graymq.core.queue_layout import (
    GRAY_LANE,
    gray_queue_ids,
    lane_base_ids,
    normal_queue_ids,
    slot_of_queue,
    slot_queue_ids,
)
from graymq.core.route import FREE_SLOT, BrokerData, TopicRoute
from graymq.core.selector import GrayQueueSelector
from graymq.protocol.errors import LaneSlotError

pytestmark = pytest.mark.unit

layouts = st.integers(1, 4).flatmap(lambda k: st.integers(0, 4).flatmap(
    lambda g: st.integers(max(g, 1), 12).map(lambda n: (n + (k - 1) * g, g, k))))


@given(layouts)
def test_slots_and_base_partition_every_queue(layout: tuple[int, int, int]) -> None:
    total, g, k = layout
    slots = [slot_queue_ids(total, g, k, s) for s in range(k)]
    every = sorted(q for ids in slots for q in ids) + list(lane_base_ids(total, g, k))
    assert sorted(every) == list(range(total))
    assert all(len(ids) == g for ids in slots)
    assert all(slot_of_queue(q, total, g, k) == s for s, ids in enumerate(slots) for q in ids)


@given(layouts)
def test_one_slot_is_todays_gray_layout_and_growing_moves_no_queue(layout: tuple[int, int, int]) -> None:
    total, g, k = layout
    base = total - (k - 1) * g
    assert slot_queue_ids(total, g, k, 0) == gray_queue_ids(base, g)
    assert lane_base_ids(total, g, k) == normal_queue_ids(base, g)
    grown = [slot_queue_ids(total + g, g, k + 1, s) for s in range(k)]
    assert grown == [slot_queue_ids(total, g, k, s) for s in range(k)]


def test_a_topic_too_small_for_its_slots_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot hold 3 lane slots"):
        slot_queue_ids(4, 2, 3, 0)


def route(lanes: dict[str, int] | None, *, n: int = 6, g: int = 2, k: int = 3) -> TopicRoute:
    broker = BrokerData("broker-a", "127.0.0.1:1", n + (k - 1) * g, g, lane_slots=k)
    return TopicRoute("T", (broker,), TopicRoute.lane_pairs(lanes))


def test_a_route_names_each_queues_lane() -> None:
    r = route({"v2": 0, "v3": 2})
    lanes = [r.lane_of(MessageQueue("T", "broker-a", q)) for q in range(10)]
    assert lanes == ["v2", None, None, None, None, "v2", FREE_SLOT, FREE_SLOT, "v3", "v3"]
    assert route(None, k=1).lane_of(MessageQueue("T", "broker-a", 0)) == GRAY_LANE
    assert r.slot_of_lane("v3") == 2 and r.slot_of_lane("gray") is None


def test_a_lane_send_takes_its_slot_and_a_lane_without_one_is_told() -> None:
    r = route({"v2": 0, "v3": 2})
    selector = GrayQueueSelector()
    assert sorted(q.queue_id for q in selector.candidates(r, "v3", True)) == [8, 9]
    assert sorted(q.queue_id for q in selector.candidates(r, False, True)) == [1, 2, 3, 4]
    assert len(selector.candidates(r, "v3", False)) == 10
    with pytest.raises(LaneSlotError, match="lane gray holds no slot on topic T"):
        selector.candidates(r, True, True)


def test_the_send_lane_follows_todays_gray_table() -> None:
    assert send_lane("v3", None, None, marks_honoured=False, gray_switch=True) == "v3"
    assert send_lane(None, "v2", None, marks_honoured=True, gray_switch=True) == "v2"
    assert send_lane(None, "v2", None, marks_honoured=False, gray_switch=True) is None
    assert send_lane(None, None, "v2", marks_honoured=True, gray_switch=True) == "v2"
    assert send_lane("v3", None, None, marks_honoured=True, gray_switch=False) is None
    assert send_lane(True, None, None, marks_honoured=False, gray_switch=True) == GRAY_LANE
    assert send_side(False, "v2", None, marks_honoured=True, gray_switch=True) is True


BASE = [ConsumerView("b1"), ConsumerView("b2")]
V2 = [ConsumerView("v2a", True, "v2"), ConsumerView("v2b", True, "v2")]
V3 = [ConsumerView("v3a", True, "v3")]


def allocation(strategy: AllocateMessageQueueGray, clients: list[ConsumerView], r: TopicRoute) -> dict[str, list[int]]:
    mqs = r.queues()
    return {c.client_id: [mq.queue_id for mq in strategy.allocate("G", c.client_id, mqs, clients)] for c in clients}


def test_each_lane_to_its_own_consumers_free_slots_to_nobody() -> None:
    r = route({"v2": 0, "v3": 2})
    got = allocation(AllocateMessageQueueGray(r.is_gray, lane_of=r.lane_of), BASE + V2 + V3, r)
    assert got == {"b1": [1, 2], "b2": [3, 4], "v2a": [0], "v2b": [5], "v3a": [8, 9]}


@pytest.mark.parametrize(("policies", "b1", "b2"), [
    ({}, [1, 2], [3, 4]),  # another lane holds by default
    ({"v3": "adopt"}, [1, 2, 3], [4, 8, 9]),
])
def test_a_lane_without_consumers_is_held_or_adopted_by_its_policy(policies, b1, b2) -> None:
    r = route({"v2": 0, "v3": 2})
    strategy = AllocateMessageQueueGray(r.is_gray, lane_of=r.lane_of, lane_policies=policies)
    got = allocation(strategy, BASE + V2, r)
    assert (got["b1"], got["b2"], got["v2a"], got["v2b"]) == (b1, b2, [0], [5])


def test_the_gray_lane_keeps_the_groups_orphan_policy_and_weight() -> None:
    r = route({"gray": 0, "v3": 1})
    adopt = AllocateMessageQueueGray(r.is_gray, lane_of=r.lane_of, orphan_policy="adopt")
    assert sorted(q for c in BASE for q in allocation(adopt, BASE + V3, r)[c.client_id]) == [0, 1, 2, 3, 4, 5]
    gray = [ConsumerView("g", True)]
    weighted = AllocateMessageQueueGray(r.is_gray, lane_of=r.lane_of, is_weighted=lambda mq: mq.queue_id == 2)
    assert allocation(weighted, BASE + gray + V3, r)["g"] == [0, 2, 5]


@given(st.lists(st.sampled_from([None, "v2", "v3", "gray"]), min_size=1, max_size=7),
       st.dictionaries(st.sampled_from(["v2", "v3", "gray"]), st.sampled_from(["hold", "adopt"])))
def test_every_client_computes_the_same_split_and_no_lane_leaks(lanes: list[str | None], policies) -> None:
    r = route({"gray": 0, "v2": 1, "v3": 2}, k=3)
    clients = [ConsumerView(f"c{i}", lane is not None, lane) for i, lane in enumerate(lanes)]
    strategy = AllocateMessageQueueGray(r.is_gray, lane_of=r.lane_of, lane_policies=policies)
    got = {c.client_id: strategy.allocate("G", c.client_id, r.queues(), clients) for c in clients}
    taken = [mq for mqs in got.values() for mq in mqs]
    assert len(taken) == len(set(taken))
    present = {c.in_lane for c in clients}
    for client in clients:
        for mq in got[client.client_id]:
            lane = r.lane_of(mq)
            assert lane == client.in_lane or (client.in_lane is None and lane not in present
                                               and strategy.policy(lane) == "adopt")
    def served(mq: MessageQueue) -> bool:
        lane = r.lane_of(mq)
        return lane in present or (None in present and (lane is None or strategy.policy(lane) == "adopt"))
    assert set(taken) == {mq for mq in r.queues() if served(mq)}
