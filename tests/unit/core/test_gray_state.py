"""The drain-then-flip state machine: every transition, the follow decisions, the drain deadline, the wire values."""

from __future__ import annotations

import doctest
import json
from typing import get_args

import pytest

from graymq.core import gray_state
from graymq.core.gray_state import GrayState, Step
from graymq.protocol.membership import CLIENT_STATES, ClientState, ClientStateName

pytestmark = pytest.mark.unit
GRAY, DRAINING, NORMAL = ClientState.GRAY, ClientState.DRAINING, ClientState.NORMAL


def at(state: ClientState) -> GrayState:
    machine = GrayState(gray=state is not NORMAL)
    if state is DRAINING:
        machine.begin_drain(timeout_s=10, now=0.0)
    assert machine.state is state
    return machine


def test_docstring_examples() -> None:
    assert doctest.testmod(gray_state).failed == 0


def test_the_wire_values_stay_those_the_name_server_stores_and_gray_status_shows() -> None:
    assert [s.value for s in ClientState] == ["NORMAL", "GRAY", "DRAINING", "RETIRED"]
    assert set(get_args(ClientStateName)) == {s.value for s in ClientState}
    assert CLIENT_STATES == ("GRAY", "DRAINING", "NORMAL", "RETIRED")  # the order of the database's check constraint
    assert json.dumps({"state": DRAINING}) == '{"state": "DRAINING"}' and f"{GRAY}" == "GRAY"


@pytest.mark.parametrize("gray, state", [(True, GRAY), (False, NORMAL)])
def test_a_new_client_starts_settled_on_its_flag(gray: bool, state: ClientState) -> None:
    machine = GrayState(gray)
    assert machine.state is state and machine.gray is gray and not machine.draining


@pytest.mark.parametrize("state, gray", [(NORMAL, False), (GRAY, True), (DRAINING, True)])
def test_a_draining_client_is_still_gray(state: ClientState, gray: bool) -> None:
    assert at(state).gray is gray
    assert at(state).draining is (state is DRAINING)


# (state, desired, a drain under way) -> step; the push consumer passes whether its drain task runs.
FOLLOW = [
    (NORMAL, True, False, Step.BECOME_GRAY),
    (NORMAL, True, True, Step.BECOME_GRAY),  # a flip to normal in flight: gray wins
    (NORMAL, False, False, Step.STAY),
    (GRAY, False, False, Step.DRAIN),
    (GRAY, False, True, Step.STAY),  # already draining (its task waits for the drain lock)
    (GRAY, True, False, Step.STAY),
    (GRAY, True, True, Step.ABANDON_DRAIN),  # a drain task that has not started draining yet
    (DRAINING, True, True, Step.ABANDON_DRAIN),
    (DRAINING, True, False, Step.STAY),  # a drain the application runs itself is not abandoned
    (DRAINING, False, True, Step.STAY),
    (DRAINING, False, False, Step.DRAIN),  # a drain that ended without settling: drain again
]


@pytest.mark.parametrize("state, desired, draining, step", FOLLOW)
def test_follow_decides_from_state_desired_flag_and_running_drain(
        state: ClientState, desired: bool, draining: bool, step: Step) -> None:
    machine = at(state)
    assert machine.follow(desired, draining=draining) is step
    assert machine.state is state  # deciding changes nothing


def test_normal_to_gray_needs_no_drain() -> None:
    machine = at(NORMAL)
    machine.become_gray()
    assert machine.state is GRAY and machine.gray


def test_gray_to_draining_sets_the_deadline() -> None:
    machine = at(GRAY)
    assert machine.begin_drain(timeout_s=30, now=100.0) == 130.0
    assert machine.state is DRAINING and machine.deadline == 130.0
    assert not machine.timed_out(now=130.0) and machine.timed_out(now=130.5)


def test_draining_to_normal_once_drained() -> None:
    machine = at(DRAINING)
    machine.flip_to_normal()
    assert machine.state is NORMAL and not machine.gray


def test_gray_to_normal_directly_when_the_gray_switch_is_off() -> None:
    machine = at(GRAY)
    machine.flip_to_normal()
    assert machine.state is NORMAL and not machine.timed_out(now=1e12)  # no drain ran, no deadline


def test_a_flip_to_normal_no_name_server_heard_drains_on_against_the_same_deadline() -> None:
    machine = at(GRAY)
    machine.begin_drain(timeout_s=5, now=0.0)
    machine.flip_to_normal()
    machine.normal_unheard()
    assert machine.state is DRAINING and machine.gray
    assert not machine.timed_out(now=5.0) and machine.timed_out(now=5.1)


def test_draining_back_to_gray_when_the_desired_flag_goes_back() -> None:
    machine = at(DRAINING)
    assert machine.follow(True, draining=True) is Step.ABANDON_DRAIN
    machine.abandon_drain()
    assert machine.state is GRAY and machine.follow(True) is Step.STAY


def test_draining_back_to_gray_on_a_drain_timeout_then_drains_again() -> None:
    machine = at(DRAINING)
    assert machine.timed_out(now=10.5)
    machine.drain_timed_out()
    assert machine.state is GRAY
    assert machine.follow(False) is Step.DRAIN  # the desired flag stays normal: the next update drains again
    machine.begin_drain(timeout_s=10, now=20.0)
    assert not machine.timed_out(now=29.0)


@pytest.mark.parametrize("desired, state", [(True, GRAY), (False, NORMAL)])
@pytest.mark.parametrize("start", [NORMAL, GRAY, DRAINING])
def test_before_consuming_the_desired_flag_is_taken_as_is(start: ClientState, desired: bool,
                                                          state: ClientState) -> None:
    machine = at(start)
    machine.adopt(desired)
    assert machine.state is state
