"""Which side a send takes, for every source of gray against every state of the group (core/gray_side.py)."""

from __future__ import annotations

import pytest

from graymq.core.gray_side import send_lane, send_side

# group state -> (marks honoured, gray switch), as the name server answers a producer of the group
SWITCH_OFF = (False, False)
RELEASE = (True, True)  # switch on, no promote/rollback running, no explicit normal flag
CUTOVER_RUNNING = (False, True)  # a promote or rollback covers the producer group
RELEASED = (False, True)  # the operation gave the producer an explicit normal flag (and it flipped normal)


@pytest.mark.parametrize(("state", "producer_gray", "expected"), [
    (SWITCH_OFF, True, False), (RELEASE, True, True), (RELEASE, False, False),
    (CUTOVER_RUNNING, False, False), (RELEASED, False, False),
])
def test_producer_flag_decides_without_marks(state: tuple[bool, bool], producer_gray: bool, expected: bool) -> None:
    marks, switch = state
    assert send_side(producer_gray, None, None, marks_honoured=marks, gray_switch=switch) is expected


@pytest.mark.parametrize(("state", "expected"), [
    (SWITCH_OFF, False), (RELEASE, True), (CUTOVER_RUNNING, False), (RELEASED, False),
])
def test_explicit_gray_mark_is_a_request_the_release_decides(state: tuple[bool, bool], expected: bool) -> None:
    marks, switch = state
    assert send_side(False, True, None, marks_honoured=marks, gray_switch=switch) is expected


@pytest.mark.parametrize(("state", "expected"), [
    (SWITCH_OFF, False), (RELEASE, True), (CUTOVER_RUNNING, False), (RELEASED, False),
])
def test_propagated_gray_mark_is_a_request_the_release_decides(state: tuple[bool, bool], expected: bool) -> None:
    marks, switch = state
    assert send_side(False, None, True, marks_honoured=marks, gray_switch=switch) is expected


@pytest.mark.parametrize("state", [SWITCH_OFF, RELEASE, CUTOVER_RUNNING, RELEASED])
def test_explicit_normal_mark_never_sends_gray(state: tuple[bool, bool]) -> None:
    marks, switch = state
    assert send_side(False, False, True, marks_honoured=marks, gray_switch=switch) is False


def test_explicit_mark_wins_over_propagated_and_flag_while_honoured() -> None:
    assert send_side(True, False, True, marks_honoured=True, gray_switch=True) is False
    assert send_side(False, None, False, marks_honoured=True, gray_switch=True) is False
    assert send_side(True, None, False, marks_honoured=True, gray_switch=True) is False


def test_gray_producer_stays_gray_where_marks_are_not_honoured() -> None:
    """A producer gray by its flag (a rule, ``--gray``) opens the next release; only a normal mark overrides it."""
    assert send_side(True, None, None, marks_honoured=False, gray_switch=True) is True
    assert send_side(True, None, False, marks_honoured=False, gray_switch=True) is True
    assert send_side(True, False, None, marks_honoured=False, gray_switch=True) is False


def test_a_frozen_lane_s_marks_are_not_honoured_while_other_lanes_marks_are() -> None:
    frozen = {"v2"}
    assert send_lane(None, "v2", None, marks_honoured=True, gray_switch=True, frozen=frozen) is None
    assert send_lane(None, None, "v2", marks_honoured=True, gray_switch=True, frozen=frozen) is None
    assert send_lane("v3", "v2", None, marks_honoured=True, gray_switch=True, frozen=frozen) == "v3"
    assert send_lane(None, None, "v3", marks_honoured=True, gray_switch=True, frozen=frozen) == "v3"
    assert send_lane(None, True, None, marks_honoured=True, gray_switch=True, frozen=frozen) == "gray"
    assert send_lane(None, True, None, marks_honoured=True, gray_switch=True, frozen={"gray"}) is None
