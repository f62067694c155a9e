"""Lanes' pure rules: the desired lane's precedence, the slot a lane takes, the refusal line, orphan defaults."""

from __future__ import annotations

import doctest
from dataclasses import dataclass

import pytest

from graymq.nameserver import gray_policy
from graymq.nameserver.gray_policy import desired_gray, desired_lane
from graymq.nameserver.services import lanes
from graymq.nameserver.services.lanes import free_slot, no_free_slot, orphan_policy_of

pytestmark = pytest.mark.unit


@dataclass(frozen=True)
class Rule:
    selector: dict[str, str]
    gray: bool
    lane: str | None = None


GROUP_V3 = Rule({"host": "orders-v3-*"}, True, "v3")
GROUP_OFF = Rule({"host": "orders-v3-canary"}, False)
ALL_V9 = Rule({"host": "orders-*"}, True, "v9")
ALL_GRAY = Rule({"zone": "b"}, True)
V3_POD = {"host": "orders-v3-7f9c"}


@pytest.mark.parametrize(
    ("switch", "explicit", "explicit_lane", "rules", "labels", "declared", "declared_lane", "expected"),
    [
        (True, None, None, [], {}, None, None, None),  # nothing says a lane: base
        (True, True, "v4", [GROUP_V3, ALL_V9], V3_POD, True, "v5", "v4"),  # an explicit flag wins
        (True, False, None, [GROUP_V3], V3_POD, True, "v5", None),  # an explicit off wins too
        (True, True, None, [GROUP_V3], V3_POD, None, None, "gray"),  # a flag without lane is gray
        (True, None, None, [GROUP_V3, ALL_V9], V3_POD, True, "v5", "v3"),  # the group's rule before all-groups
        (True, None, None, [GROUP_OFF, ALL_V9], {"host": "orders-v3-canary"}, None, None, None),  # its off too
        (True, None, None, [GROUP_V3, ALL_V9], {"host": "orders-v1-x"}, True, "v5", "v9"),  # all-groups: declared
        (True, None, None, [ALL_GRAY], {"zone": "b"}, None, None, "gray"),
        (True, None, None, [GROUP_V3], {"host": "other"}, True, "v5", "v5"),  # what it declared
        (True, None, None, [], {}, True, None, "gray"),  # --gray is --lane gray
        (False, True, "v4", [GROUP_V3], V3_POD, True, "v5", None),  # switch off: no lanes
    ],
)
def test_the_desired_lane_follows_the_precedence_of_the_design(
    switch: bool, explicit: bool | None, explicit_lane: str | None, rules: list[Rule], labels: dict[str, str],
    declared: bool | None, declared_lane: str | None, expected: str | None,
) -> None:
    assert desired_lane(switch, explicit, explicit_lane, rules, labels, declared, declared_lane) == expected
    assert desired_gray(switch, explicit, rules, labels, declared) is (
        desired_lane(switch, explicit, None, rules, labels, declared) is not None)


@pytest.mark.parametrize(
    ("lane", "slots", "held", "expected"),
    [("gray", 2, [], 0), ("gray", 3, [0], 1), ("v2", 3, [], 0), ("v2", 3, [0, 2], 1), ("v3", 2, [1, 0], None),
     ("gray", 1, [0], None)],
)
def test_gray_prefers_slot_0_and_other_lanes_take_the_lowest_free(
    lane: str, slots: int, held: list[int], expected: int | None
) -> None:
    assert free_slot(lane, slots, held) == expected


def test_the_refusal_is_the_one_line_of_the_design_naming_holders_sorted() -> None:
    line = no_free_slot("T", 2, ["v3", "v2"])
    assert line == ("topic T has no free lane slot (2 of 2 held by v2, v3): grow it (graymq topic update T --lanes 3) "
                    "or end a lane")
    assert "\n" not in line


@pytest.mark.parametrize(
    ("lane", "override", "group_policy", "taking_part", "expected"),
    [("gray", None, "hold", False, "hold"), ("gray", None, "adopt", True, "adopt"), ("gray", "hold", "adopt", False,
     "hold"), ("v3", None, "hold", True, "hold"), ("v3", None, "hold", False, "adopt"),
     ("v3", "hold", "adopt", False, "hold"), ("v3", "adopt", "hold", True, "adopt")],
)
def test_orphan_policy_override_then_gray_follows_the_group_then_taking_part_holds(
    lane: str, override: str | None, group_policy: str, taking_part: bool, expected: str
) -> None:
    assert orphan_policy_of(lane, override, group_policy, taking_part) == expected


def test_doctests() -> None:
    assert doctest.testmod(gray_policy).failed == 0
    assert doctest.testmod(lanes).failed == 0
