"""The name server's answers as frozen values (``client.nameserver_records``)."""

from __future__ import annotations

import doctest

import pytest

from graymq.nameserver_api import records as nameserver_records

pytestmark = pytest.mark.unit


def test_doctests() -> None:
    assert doctest.testmod(nameserver_records).failed == 0
