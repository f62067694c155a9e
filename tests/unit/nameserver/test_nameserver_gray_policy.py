"""The desired grayFlag: switch, then the explicit per-client value, then the first matching rule."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graymq.nameserver.gray_policy import desired_gray, rule_matches

pytestmark = pytest.mark.unit


@dataclass(frozen=True)
class Rule:
    selector: dict[str, str]
    gray: bool


V2_GRAY = Rule({"version": "v2"}, True)


@pytest.mark.parametrize(
    ("switch", "explicit", "rules", "labels", "expected"),
    [
        (True, None, [], {}, False),
        (True, True, [], {}, True),
        (True, False, [V2_GRAY], {"version": "v2"}, False),
        (True, None, [V2_GRAY], {"version": "v2"}, True),
        (True, None, [V2_GRAY], {"version": "v1"}, False),
        (True, None, [V2_GRAY], {}, False),
        (True, None, [Rule({"zone": "a"}, False), V2_GRAY], {"version": "v2", "zone": "a"}, False),
        (True, None, [Rule({"zone": "b"}, False), V2_GRAY], {"version": "v2", "zone": "a"}, True),
        (True, None, [Rule({"version": "v2", "zone": "b"}, True)], {"version": "v2", "zone": "a"}, False),
        (False, True, [V2_GRAY], {"version": "v2"}, False),
        (False, None, [V2_GRAY], {"version": "v2"}, False),
    ],
)
def test_desired_gray_table(
    switch: bool, explicit: bool | None, rules: list[Rule], labels: dict[str, str], expected: bool
) -> None:
    assert desired_gray(switch, explicit, rules, labels) is expected


labels_strategy = st.dictionaries(st.sampled_from("abcd"), st.sampled_from("xyz"), max_size=4)


@given(
    explicit=st.none() | st.booleans(),
    rules=st.lists(st.builds(Rule, labels_strategy, st.booleans()), max_size=5),
    labels=labels_strategy,
)
def test_switch_off_makes_every_client_normal(
    explicit: bool | None, rules: list[Rule], labels: dict[str, str]
) -> None:
    assert desired_gray(False, explicit, rules, labels) is False


@given(selector=labels_strategy, labels=labels_strategy)
def test_a_rule_matches_exactly_when_its_labels_are_a_subset_of_the_clients(
    selector: dict[str, str], labels: dict[str, str]
) -> None:
    assert rule_matches(selector, labels) is (selector.items() <= labels.items())


@pytest.mark.parametrize(
    ("pattern", "value", "matches"),
    [
        ("orders-v2-*", "orders-v2-7f9c-x2k", True),
        ("orders-v2-*", "orders-v2-", True),
        ("orders-v2-*", "orders-v1-7f9c-x2k", False),
        ("orders-v2-*", "ORDERS-V2-7f9c", False),
        ("orders-v?-a", "orders-v3-a", True),
        ("orders-v[12]-a", "orders-v2-a", True),
        ("orders-v[12]-a", "orders-v3-a", False),
        ("*", "", True),
        ("v2", "v2", True),
        ("v2", "v2x", False),
    ],
)
def test_a_selector_value_is_a_case_sensitive_glob(pattern: str, value: str, matches: bool) -> None:
    assert rule_matches({"host": pattern}, {"host": value}) is matches
    assert rule_matches({"host": pattern}, {"zone": value}) is False  # a missing label never matches


def test_a_glob_rule_makes_the_matching_hosts_gray_and_only_them() -> None:
    rules = [Rule({"host": "orders-v2-*"}, True)]
    assert desired_gray(True, None, rules, {"host": "orders-v2-5c8d-abcde"}) is True
    assert desired_gray(True, None, rules, {"host": "orders-v1-5c8d-abcde"}) is False
