"""Weights per lane (docs/lanes.md, "Weights and rollouts per lane"): disjoint shares of the base queues, ``gray``
first and then the other lanes by name; the allocation hands each share to its lane's consumers only."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graymq.core.allocate import AllocateMessageQueueGray, ConsumerView
from graymq.core.group_gray import GroupGray
from graymq.core.queue_layout import lane_base_ids, lane_weight_shares, lane_weighted_ids, weighted_count
from graymq.core.route import BrokerData, TopicRoute

pytestmark = pytest.mark.unit

layouts = st.integers(1, 3).flatmap(lambda k: st.integers(0, 3).flatmap(
    lambda g: st.integers(max(g, 1), 16).map(lambda n: (n + (k - 1) * g, g, k))))
lane_names = st.sampled_from(["gray", "v2", "v3", "canary", "z9"])


@given(layouts, st.integers(0, 100))
def test_the_gray_lane_alone_takes_exactly_todays_weighted_queues(layout: tuple[int, int, int], weight: int) -> None:
    total, g, k = layout
    shares = lane_weight_shares(total, g, k, (("gray", weight),))
    assert sorted(shares) == sorted(lane_weighted_ids(total, g, k, weight))
    assert set(shares.values()) <= {"gray"}


@given(layouts, st.dictionaries(lane_names, st.integers(0, 100), max_size=4))
def test_the_shares_are_disjoint_base_queues_and_each_lane_takes_its_count_while_the_sum_fits(
        layout: tuple[int, int, int], weights: dict[str, int]) -> None:
    total, g, k = layout
    base = lane_base_ids(total, g, k)
    shares = lane_weight_shares(total, g, k, tuple(weights.items()))
    assert set(shares) <= set(base)  # a dict: no queue in two shares; never a slot's queue
    counts = {lane: list(shares.values()).count(lane) for lane in weights}
    assert all(counts[lane] <= weighted_count(len(base), w) for lane, w in weights.items())
    wanted = sum(weighted_count(len(base), w) for w in weights.values())
    if wanted <= len(base):
        assert counts == {lane: weighted_count(len(base), w) for lane, w in weights.items()}
    else:
        assert len(shares) == len(base)  # what the lanes ask for exceeds the base: every base queue goes


@given(layouts, st.dictionaries(lane_names, st.integers(0, 100), max_size=4), st.randoms())
def test_the_shares_depend_on_the_weights_only_not_on_their_order(layout, weights, rnd) -> None:
    total, g, k = layout
    pairs = list(weights.items())
    shuffled = pairs[:]
    rnd.shuffle(shuffled)
    assert dict(lane_weight_shares(total, g, k, tuple(pairs))) == dict(lane_weight_shares(total, g, k,
                                                                                          tuple(shuffled)))


def test_gray_comes_first_then_the_other_lanes_by_name() -> None:
    # 8 queues, 2 gray (0 7): base 1..6. gray 50% takes 2 4 6 as without lanes; v2 then one of 1 3 5, v3 one more
    shares = lane_weight_shares(8, 2, 1, (("v3", 20), ("gray", 50), ("v2", 20)))
    assert dict(shares) == {2: "gray", 4: "gray", 6: "gray", 3: "v2", 5: "v3"}
    assert dict(lane_weight_shares(8, 2, 1, (("v3", 60), ("v2", 60)))) == {
        1: "v2", 3: "v2", 4: "v2", 6: "v2", 2: "v3", 5: "v3"}  # v2 four of six, v3 the two left: fewer than asked


def test_a_weight_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="weight of lane v3 must be 0..100"):
        lane_weight_shares(8, 2, 1, (("v3", 101),))


def test_the_group_gray_weights_take_gray_from_weight_and_read_only_other_lanes_from_an_answer() -> None:
    gg = GroupGray(weight=10, lane_weights=GroupGray.lane_weights_of(
        {"v3": {"weight": 20, "orphan_policy": "hold"}, "v2": {"weight": 0}, "gray": {"weight": 99},
         "bad": {"weight": "x"}, "v4": "nonsense"}))
    assert gg.weights == (("gray", 10), ("v3", 20))
    assert GroupGray.lane_weights_of(None) == {}


def allocation(weights: tuple[tuple[str, int], ...], clients: list[ConsumerView]) -> dict[str, list[int]]:
    """Queue ids each client takes of a topic of 8 base queues and two slots of 2 (gray 0 9, v3 10 11)."""
    broker = BrokerData("b", "127.0.0.1:1", 12, 2, lane_slots=2)
    route = TopicRoute("T", (broker,), TopicRoute.lane_pairs({"gray": 0, "v3": 1}))
    strategy = AllocateMessageQueueGray(route.is_gray, lane_of=route.lane_of,
                                        weighted_lane=lambda mq: route.weighted_lane(mq, weights))
    queues = route.queues()
    return {c.client_id: [mq.queue_id for mq in strategy.allocate("G", c.client_id, queues, clients)]
            for c in clients}


BASE, GRAY, V2, V3 = ConsumerView("b1"), ConsumerView("g1", True), ConsumerView("c2", True, "v2"), ConsumerView(
    "c3", True, "v3")


def test_two_weighted_lanes_each_take_their_share_and_every_queue_has_one_consumer() -> None:
    taken = allocation((("v2", 25), ("v3", 25)), [BASE, GRAY, V2, V3])
    # base 1..8: v2 two spread over them (3 7), v3 two spread over the six left (2 6)
    assert taken == {"b1": [1, 4, 5, 8], "g1": [0, 9], "c2": [3, 7], "c3": [2, 6, 10, 11]}
    every = sorted(q for ids in taken.values() for q in ids)
    assert every == list(range(12))


def test_a_weighted_lane_without_a_consumer_leaves_its_share_to_the_base_consumers() -> None:
    taken = allocation((("v2", 25), ("v3", 25)), [BASE, GRAY, V3])
    assert taken["c3"] == [2, 6, 10, 11]  # its share is where it was: v2's absence moves nothing of v3's
    assert taken["b1"] == [1, 3, 4, 5, 7, 8]
