"""The names of a recorded gray-release operation (promote, rollback, rollout), typed once.

The name server stores an operation's kind, mode, state and step as these enums' values
(``cutover_operations`` columns); the runbooks write them, the console and ``graymq gray``
read them. A state changes only as ``CutoverState.is_transition_valid`` allows::

    RUNNING --a step recorded----------------------> RUNNING
    RUNNING --every step done----------------------> SUCCEEDED
    RUNNING --a step failed or timed out-----------> FAILED
    RUNNING --a rollout rolled the gray side back--> ABORTED    (rollouts only)

SUCCEEDED, FAILED and ABORTED are final: a finished operation is never changed again.
"""

from __future__ import annotations

from enum import StrEnum

# Upper bounds of the durations an operation is given (the CLI's options, the console's and the API's fields): what
# an operator means is far below them, anything above is a typo (or inf) that would never end.
MAX_STEP_S = 86_400.0  # a rollout's time at one weight: a day
MAX_TIMEOUT_S = 604_800.0  # a timeout or a wait: a week
MAX_P99_MS = MAX_STEP_S * 1000  # a rollout's p99 threshold: no latency above a step is measured within it


class CutoverKind(StrEnum):
    """What an operation does to a group's gray side."""

    PROMOTE = "promote"
    ROLLBACK = "rollback"
    ROLLOUT = "rollout"  # weighted steps, then promote or hold (or roll back on a failed check)


class CutoverMode(StrEnum):
    """How: promote/rollback ``drain`` or ``adopt`` the gray backlog; a rollout's mode is what follows its last step."""

    DRAIN = "drain"
    ADOPT = "adopt"
    PROMOTE = "promote"
    HOLD = "hold"


MODES_OF_KIND: dict[CutoverKind, tuple[CutoverMode, ...]] = {
    CutoverKind.PROMOTE: (CutoverMode.DRAIN, CutoverMode.ADOPT),
    CutoverKind.ROLLBACK: (CutoverMode.DRAIN, CutoverMode.ADOPT),
    CutoverKind.ROLLOUT: (CutoverMode.PROMOTE, CutoverMode.HOLD),
}
"""The modes the name server accepts for each kind (the promote runbook records ``drain``)."""


class CutoverState(StrEnum):
    """Where an operation is; see the module docstring for the transitions.

    >>> CutoverState.RUNNING.is_transition_valid(CutoverState.SUCCEEDED, CutoverKind.PROMOTE)
    True
    >>> CutoverState.RUNNING.is_transition_valid(CutoverState.ABORTED, CutoverKind.PROMOTE)
    False
    >>> CutoverState.FAILED.is_transition_valid(CutoverState.RUNNING, CutoverKind.ROLLOUT)
    False
    """

    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    ABORTED = "ABORTED"

    @property
    def finished(self) -> bool:
        return self is not CutoverState.RUNNING

    def is_transition_valid(self, target: CutoverState, kind: CutoverKind) -> bool:
        """Whether an operation of ``kind`` in this state may be recorded in ``target``."""
        return target in _TRANSITIONS[self] and (target is not CutoverState.ABORTED or kind is CutoverKind.ROLLOUT)


_TRANSITIONS: dict[CutoverState, frozenset[CutoverState]] = {
    CutoverState.RUNNING: frozenset(CutoverState),
    CutoverState.SUCCEEDED: frozenset(),
    CutoverState.FAILED: frozenset(),
    CutoverState.ABORTED: frozenset(),
}


class CutoverStep(StrEnum):
    """The step an operation recorded last (a rollout's weight steps are ``weight_step``'s text)."""

    PRODUCERS = "producers"  # gray producers flipped normal, waited for
    DRAIN = "drain"  # gray consumers drain the gray queues, then flip
    ADOPT = "adopt"  # normal consumers adopt the gray queues (rollback --adopt)
    VERIFY = "verify"  # no gray client and no gray backlog left
    PROMOTE = "promote"  # a rollout whose every step passed runs promote's steps
    ROLLBACK = "rollback"  # a rollout whose check failed rolls the gray side back
    DONE = "done"


PAST_WEIGHT_STEPS = frozenset({CutoverStep.PROMOTE, CutoverStep.ROLLBACK, CutoverStep.PRODUCERS, CutoverStep.DRAIN,
                               CutoverStep.ADOPT, CutoverStep.VERIFY})
"""The steps of a rollout past its weight steps: it promotes or rolls back, so its producer groups honour no marks."""


def weight_step(index: int, steps: int, weight: int) -> str:
    """The step text of a rollout checking weight ``weight`` %, its step ``index`` (0-based) of ``steps``.

    >>> weight_step(0, 3, 5)
    'step 1/3: weight 5%'
    """
    return f"step {index + 1}/{steps}: weight {weight}%"


class RolloutPhase(StrEnum):
    """Where a rollout is: checking its weight steps, then what follows them."""

    STEPS = "steps"
    PROMOTE = "promote"
    HOLD = "hold"
    ROLLBACK = "rollback"


class RolloutOutcome(StrEnum):
    """How a rollout ended, as ``graymq gray rollout`` reports it (``outcome``)."""

    RUNNING = "RUNNING"
    PROMOTED = "PROMOTED"
    HELD = "HELD"
    ROLLED_BACK = "ROLLED_BACK"
    FAILED = "FAILED"
