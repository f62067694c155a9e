"""A broker's lease on its routes: a few of its registration intervals, bounded both ways (the examples hold)."""

from __future__ import annotations

import doctest

import pytest

from graymq.nameserver.services import route_lease as lease

pytestmark = pytest.mark.unit


def test_the_lease_examples_hold() -> None:
    assert doctest.testmod(lease).failed == 0
