"""Operation kinds, modes, states and steps typed once in ``protocol.operations``, and the state transitions."""

from __future__ import annotations

import doctest

import pytest

from graymq.nameserver import models
from graymq.protocol import operations
from graymq.protocol.operations import CutoverKind, CutoverMode, CutoverState, RolloutOutcome

pytestmark = pytest.mark.unit


def test_doctests() -> None:
    assert doctest.testmod(operations).failed == 0


@pytest.mark.parametrize("kind", list(CutoverKind))
def test_a_running_operation_may_record_a_step_succeed_or_fail(kind: CutoverKind) -> None:
    for target in (CutoverState.RUNNING, CutoverState.SUCCEEDED, CutoverState.FAILED):
        assert CutoverState.RUNNING.is_transition_valid(target, kind)


def test_only_a_rollout_ends_aborted() -> None:
    allowed = {kind for kind in CutoverKind if CutoverState.RUNNING.is_transition_valid(CutoverState.ABORTED, kind)}
    assert allowed == {CutoverKind.ROLLOUT}


@pytest.mark.parametrize("finished", [CutoverState.SUCCEEDED, CutoverState.FAILED, CutoverState.ABORTED])
def test_a_finished_operation_goes_nowhere(finished: CutoverState) -> None:
    assert finished.finished
    assert not any(finished.is_transition_valid(target, kind) for target in CutoverState for kind in CutoverKind)


def test_the_database_stores_the_enum_values() -> None:
    assert models.CUTOVER_KINDS == ("promote", "rollback", "rollout")
    assert models.CUTOVER_MODES == ("drain", "adopt", "promote", "hold")
    assert models.CUTOVER_STATES == ("RUNNING", "SUCCEEDED", "FAILED", "ABORTED")
    assert all(type(v) is str for v in models.CUTOVER_KINDS + models.CUTOVER_MODES + models.CUTOVER_STATES)


def test_every_mode_belongs_to_a_kind() -> None:
    assert {mode for modes in operations.MODES_OF_KIND.values() for mode in modes} == set(CutoverMode)


def test_a_rollout_outcome_prints_as_its_value() -> None:
    assert f"{RolloutOutcome.ROLLED_BACK}" == "ROLLED_BACK" and str(CutoverKind.PROMOTE) == "promote"
