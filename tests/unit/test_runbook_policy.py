"""One policy, three ways in: the CLI's options, the console's REST body and its form build the same
``CutoverPolicy``/``RolloutPolicy``, and what they leave out is the policies' default (a promote started from the
console runs as one started from the CLI)."""

from __future__ import annotations

import doctest

import pytest

from graymq.gray_controller.cli import build_parser
from graymq.gray_controller.cli.policy_args import cutover_policy, rollout_policy
from graymq.nameserver.console.operations import console_policy
from graymq.nameserver.console.rollouts import RolloutRequest, form_defaults
from graymq.nameserver.errors import ApiError
from graymq.protocol.errors import ConfigError
from graymq.protocol.operations import CutoverMode
from graymq.runbooks import policy as policy_module
from graymq.runbooks.policy import CutoverPolicy, RolloutPolicy

pytestmark = pytest.mark.unit


def parsed(*argv: str):  # type: ignore[no-untyped-def]
    return build_parser().parse_args(["gray", *argv])


def test_the_documented_examples_hold() -> None:
    assert doctest.testmod(policy_module).failed == 0


@pytest.mark.parametrize("argv", [("promote", "G"), ("rollback", "G"), ("promote", "G", "--then", "SINK")])
def test_a_promote_or_rollback_without_options_runs_by_the_default_policy(argv: tuple[str, ...]) -> None:
    assert cutover_policy(parsed(*argv)) == CutoverPolicy()


def test_the_cli_options_make_the_policy() -> None:
    args = parsed("rollback", "G", "--adopt", "--timeout", "20", "--producer-group", "P1", "--producer-group", "P2")
    assert cutover_policy(args) == CutoverPolicy(("P1", "P2"), CutoverMode.ADOPT, 20.0)
    assert cutover_policy(args).producer_groups_of("G") == ["P1", "P2"]
    assert CutoverPolicy().producer_groups_of("G") == ["G"]


def test_a_rollout_without_options_runs_by_the_default_policies_as_the_console_does() -> None:
    args = parsed("rollout", "G", "--steps", "5,50", "--step-seconds", "30")
    body = RolloutRequest(steps=[5, 50], step_seconds=30)
    assert (rollout_policy(args), cutover_policy(args)) == body.policies() == (RolloutPolicy((5, 50), 30.0),
                                                                              CutoverPolicy())


def test_the_rollout_options_and_the_body_fields_make_the_same_policies() -> None:
    args = parsed("rollout", "G", "--steps", "5", "--step-seconds", "2", "--max-failure-rate", "1",
                  "--failure-margin", "0", "--max-p99-ms", "80", "--max-lag", "9", "--min-messages", "3",
                  "--failed-checks", "2", "--then", "hold", "--timeout", "60", "--wait-for-gray", "0")
    body = RolloutRequest(steps=[5], step_seconds=2, max_failure_rate=1, failure_margin=0, max_p99_ms=80, max_lag=9,
                          min_messages=3, failed_checks=2, then="hold", timeout_s=60)
    rollout = RolloutPolicy((5,), 2.0, 1.0, 0.0, 80.0, 9, 3, 2, "hold")
    assert rollout_policy(args) == body.policies()[0] == rollout
    assert cutover_policy(args) == CutoverPolicy(timeout_s=60.0, wait_for_gray_s=0.0)
    assert body.policies()[1] == CutoverPolicy(timeout_s=60.0)  # the console waits for a gray consumer as the CLI


def test_a_value_out_of_range_is_refused_naming_the_option_a_400_from_the_console() -> None:
    with pytest.raises(ConfigError, match="--timeout"):
        CutoverPolicy(timeout_s=0)
    with pytest.raises(ApiError, match="--timeout"):
        RolloutRequest(steps=[5], step_seconds=1, timeout_s=-1).policies()
    with pytest.raises(ApiError, match="--min-messages"):
        RolloutRequest(steps=[5], step_seconds=1, min_messages=0).policies()
    assert console_policy("adopt").mode == CutoverMode.ADOPT and console_policy() == CutoverPolicy()


def test_the_console_form_shows_the_policies_defaults_as_the_cli_help_does() -> None:
    assert form_defaults() == {"max_failure_rate": "5", "failure_margin": "5", "min_messages": "10",
                               "failed_checks": "1", "then": "promote", "timeout_s": "300"}


def test_a_recorded_rollout_policy_gives_the_same_policy_back() -> None:
    policy = RolloutPolicy([5, 25], 1.5, max_p99_ms=20.0)
    assert policy.to_json()["steps"] == [5, 25]
    assert RolloutPolicy(**policy.to_json()) == policy
