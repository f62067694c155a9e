"""The pure parts of the lane commands: which lane ``--gray``/``--lane`` name, the one-line refusal a consumer gets
before starting in a lane a full topic has no slot for, the slots ``topic route`` lists, a lane's state word."""

from __future__ import annotations

import argparse
import doctest

import pytest

from graymq.core.route import BrokerData, TopicRoute
from graymq.gray_controller.cli import common
from graymq.gray_controller.cli.lane_cmd import no_free_slot
from graymq.gray_controller.cli.topic_cmd import _slots
from graymq.protocol.errors import ConfigError
from graymq.runbooks import group_state


def test_doctests() -> None:
    assert doctest.testmod(common).failed == 0
    assert doctest.testmod(group_state).failed == 0


def test_gray_is_the_lane_gray_and_naming_two_lanes_is_refused() -> None:
    assert common.lane_of_args(argparse.Namespace(gray=False, lane=None)) is None
    assert common.lane_of_args(argparse.Namespace(gray=True, lane="gray")) == "gray"
    with pytest.raises(ConfigError, match="give --gray or --lane v3, not both"):
        common.lane_of_args(argparse.Namespace(gray=True, lane="v3"))


def route(lanes: dict[str, int] | None, slots: int = 2, gray: int = 1) -> TopicRoute:
    broker = BrokerData("b", "127.0.0.1:1", 4 + (slots - 1) * gray, gray, lane_slots=slots)
    return TopicRoute("T", (broker,), TopicRoute.lane_pairs(lanes))


def test_a_lane_finds_no_slot_only_when_other_lanes_hold_every_one() -> None:
    assert no_free_slot(route({"v2": 0, "v3": 1}), "v4") == (
        "topic T has no free lane slot (2 of 2 held by v2, v3): grow it (graymq topic update T --lanes 3) "
        "or end a lane")
    assert no_free_slot(route({"v2": 0, "v3": 1}), "v3") is None  # it holds one
    assert no_free_slot(route({"v2": 0}), "v4") is None  # one is free
    assert no_free_slot(route({"v2": 0}, slots=1, gray=0), "v4") is None  # no gray queues: no slot to take
    assert no_free_slot(route(None), "v4") is None  # an answer from before lanes: the name server decides


def test_topic_route_lists_each_slot_with_its_queues_and_lane() -> None:
    broker = {"queue_nums": 8, "gray_queue_nums": 2, "lane_slots": 3}
    assert _slots(broker, {"v3": 2, "gray": 0}) == [{"slot": 0, "queue_ids": [0, 3], "lane": "gray"},
                                                    {"slot": 1, "queue_ids": [4, 5], "lane": None},
                                                    {"slot": 2, "queue_ids": [6, 7], "lane": "v3"}]
    assert _slots({"queue_nums": 4, "gray_queue_nums": 0}, {}) == []


def test_a_lane_is_off_draining_consuming_held_or_adopted() -> None:
    assert group_state.lane_state(True, ["GRAY", "DRAINING"], "hold") == "draining"
    assert group_state.lane_state(True, [], "hold") == "held"
