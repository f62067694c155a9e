"""UnauthenticatedBudget without a network: per-address and overall limits, and release."""

from __future__ import annotations

import doctest

from graymq.broker_ext.security import connection_budget
from graymq.broker_ext.security.connection_budget import UnauthenticatedBudget


def test_doctests() -> None:
    assert doctest.testmod(connection_budget).failed == 0


def test_a_released_connection_frees_its_address_and_a_second_release_changes_nothing() -> None:
    budget = UnauthenticatedBudget(limit=10, per_address=1)
    conn = object()
    budget.add(conn, "10.0.0.1")  # type: ignore[arg-type]
    assert budget.refusal("10.0.0.1") == "per_address"
    budget.release(conn)  # type: ignore[arg-type]
    budget.release(conn)  # type: ignore[arg-type]
    assert budget.refusal("10.0.0.1") is None
    budget.add(object(), "10.0.0.1")  # type: ignore[arg-type]
    assert budget.refusal("10.0.0.1") == "per_address"


def test_the_per_address_limit_is_checked_before_the_overall_one() -> None:
    budget = UnauthenticatedBudget(limit=1, per_address=1)
    budget.add(object(), "10.0.0.1")  # type: ignore[arg-type]
    assert budget.refusal("10.0.0.1") == "per_address"
    assert budget.refusal("10.0.0.2") == "limit"
