"""The rollout's analysis without a cluster: health reports added up and differenced per side, the verdict of a
check, each side's lag from who holds which queue, and a policy out of range refused in one line."""

from __future__ import annotations

import doctest
from typing import Any

import pytest

from graymq.client.backlog import QueueBacklog
from graymq.gray_controller.cli import rollout_cmd, text
from graymq.protocol import health
from graymq.protocol.errors import ConfigError
from graymq.runbooks import rollout
from graymq.runbooks.group_state import GroupStatus, side_lag
from graymq.runbooks.policy import RolloutPolicy
from graymq.runbooks.rollout import RolloutReport, judge
from tests.support.records import client_record

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("module", [health, rollout, rollout_cmd, text])
def test_the_documented_examples_hold(module: Any) -> None:
    assert doctest.testmod(module).failed == 0


def test_a_client_that_restarted_counts_whole_and_one_that_left_not_at_all() -> None:
    before = {"a": {"gray": {"consumed": 100, "failed": 10}}, "gone": {"gray": {"consumed": 500}}}
    after = {"a": {"gray": {"consumed": 5, "failed": 1}}, "new": {"normal": {"consumed": 7}}}
    figures = health.since(before, after)
    assert (figures["gray"]["consumed"], figures["gray"]["failed"], figures["normal"]["consumed"]) == (5, 1, 7)


def test_a_check_without_failures_on_either_side_passes_and_lag_is_judged_only_when_bounded() -> None:
    quiet = {"consumed": 50, "failed": 0, "p99_ms": 900.0}
    assert judge(RolloutPolicy([5], 1.0), quiet, quiet, {"gray": 10_000}) == []
    assert judge(RolloutPolicy([5], 1.0, max_lag=100), quiet, quiet, {"gray": 101}) == ["gray lag 101 > 100"]


def status(clients: list[dict[str, Any]], gray_queues: list[str]) -> GroupStatus:
    return GroupStatus("g", True, "hold", [client_record(**c) for c in clients],
                       queues=[backlog(q, 0) for q in gray_queues])


def backlog(key: str, behind: int) -> QueueBacklog:
    broker, topic, queue_id = key.split(":")
    return QueueBacklog(topic, broker, int(queue_id), 0, behind, behind)


def test_each_side_lags_by_what_it_holds_and_an_unheld_queue_by_its_layout() -> None:
    clients = [{"client_id": "v2", "gray": True, "state": "GRAY", "queues": ["b:T:0", "b:T:2"]},
               {"client_id": "v1", "gray": False, "state": "NORMAL", "queues": ["b:T:1"]}]
    lags = [backlog("b:T:0", 3), backlog("b:T:1", 5), backlog("b:T:2", 7), backlog("b:T:3", 11),
            backlog("b:T:5", 13)]
    assert side_lag(status(clients, ["b:T:0", "b:T:5"]), lags) == {"gray": 3 + 7 + 13, "normal": 5 + 11}


def test_a_retired_consumer_holds_nothing_so_its_queues_count_by_layout() -> None:
    clients = [{"client_id": "v2", "gray": True, "state": "RETIRED", "queues": ["b:T:2"]}]
    assert side_lag(status(clients, ["b:T:0"]), [backlog("b:T:0", 1), backlog("b:T:2", 4)]) == {"gray": 1, "normal": 4}


@pytest.mark.parametrize("changes, names", [
    ({"steps": []}, "--steps"), ({"steps": [0]}, "--steps"), ({"step_seconds": 0}, "--step-seconds"),
    ({"max_failure_rate": 101}, "--max-failure-rate"), ({"min_messages": 0}, "--min-messages"),
    ({"failed_checks": 0}, "--failed-checks"), ({"max_p99_ms": 0}, "--max-p99-ms"), ({"then": "wait"}, "--then"),
])
def test_a_policy_out_of_range_is_refused_naming_the_option(changes: dict[str, Any], names: str) -> None:
    base: dict[str, Any] = {"steps": [5, 25], "step_seconds": 30.0}
    with pytest.raises(ConfigError, match=names):
        RolloutPolicy(**{**base, **changes})


@pytest.mark.parametrize("state, phase, outcome", [
    ("SUCCEEDED", "promote", "PROMOTED"), ("SUCCEEDED", "hold", "HELD"), ("ABORTED", "rollback", "ROLLED_BACK"),
    ("FAILED", "steps", "FAILED"), ("RUNNING", "steps", "RUNNING"),
])
def test_the_outcome_follows_the_recorded_state_and_phase(state: str, phase: str, outcome: str) -> None:
    report = RolloutReport(1, "rollout", "promote", "g", state=state, phase=phase)
    assert report.outcome == outcome and report.to_json()["outcome"] == outcome
