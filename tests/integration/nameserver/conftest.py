"""Fixtures for name server tests: a migrated PostgreSQL database and an in-process API client."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from nameserver_testkit import OPS, make_settings

from graymq.migrations.schema import upgrade
from graymq.nameserver.app import create_app


@pytest.fixture(scope="module")
def db_url(pg_url: str) -> str:
    """The module's fresh PostgreSQL database, migrated to head."""
    upgrade(pg_url)
    return pg_url


@pytest.fixture(scope="module")
def api(db_url: str) -> Iterator[TestClient]:
    """The name server app on the module's database (default settings, named tokens ops and ci)."""
    with TestClient(create_app(make_settings(db_url)), headers=OPS) as client:
        yield client
