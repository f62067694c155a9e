"""RefusedRegistrations: the last refusal per broker name, kept while its broker may still be trying, forgotten
once that broker (replica) registers, bounded in how many names it holds."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from graymq.nameserver.refused_registrations import MAX_KEPT, RefusedRegistrations, refusal_text

pytestmark = pytest.mark.unit

AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_refusal_is_kept_for_its_time_replaced_by_the_next_and_forgotten_on_registration() -> None:
    clock = Clock()
    refused = RefusedRegistrations(clock, lambda: AT)
    refused.refused("broker-b", None, "principal p may not register as broker broker-b", 10)
    refused.refused("broker-a", 1, "first", 10)
    refused.refused("broker-a", 1, "second", 10)
    assert [(r.broker_name, r.replica_id, r.reason) for r in refused.current()] == [
        ("broker-a", 1, "second"), ("broker-b", None, "principal p may not register as broker broker-b")]
    assert refusal_text(refused.current()[1:]) == \
        "principal p may not register as broker broker-b (refused at 03:04:05 UTC)"
    refused.registered("broker-a", 0)  # another replica of the set: replica 1 stays refused
    assert [r.broker_name for r in refused.current()] == ["broker-a", "broker-b"]
    refused.registered("broker-a", 1)
    assert [r.broker_name for r in refused.current()] == ["broker-b"]
    clock.now += 10
    assert refused.current() == []


def test_only_the_latest_names_are_kept() -> None:
    refused = RefusedRegistrations(Clock(), lambda: AT)
    for i in range(MAX_KEPT + 5):
        refused.refused(f"b{i:04d}", None, "no", 60)
    names = [r.broker_name for r in refused.current()]
    assert len(names) == MAX_KEPT and names[0] == "b0005"
