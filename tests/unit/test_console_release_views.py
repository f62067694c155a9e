"""The console's release views without a cluster: the health ring's points, the audit's field changes, a rollout's
steps and checks against its thresholds, and the rollout confirmation (their docstring examples), plus the ring's
bounds."""

from __future__ import annotations

import doctest

import pytest

from graymq.nameserver.console import audit_changes, rollout_view, rollouts
from graymq.nameserver.services import health_history
from graymq.nameserver.services.health_history import KEPT_S, HealthHistory

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("module", [health_history, audit_changes, rollout_view, rollouts])
def test_the_examples_hold(module: object) -> None:
    assert doctest.testmod(module).failed == 0  # type: ignore[arg-type]


def test_the_ring_keeps_fifteen_minutes_and_forgets_a_group_without_reports() -> None:
    history = HealthHistory(sample_s=5.0)
    for i in range(400):  # 2,000 s of one client consuming 10 msgs/s
        history.add({"G": {"c1": {"normal": {"consumed": 50 * i}}}} if i < 300 else {}, at=5.0 * i)
    normal = history.series("G")["normal"]
    assert len(normal) == KEPT_S / 5 + 1
    assert normal[-1]["per_second"] == 0 and max(p["per_second"] for p in normal) == 10.0
    history.add({}, at=5.0 * 300 + KEPT_S)
    assert history.series("G") == {"gray": [], "normal": []}
