"""Fixtures for name server tests: a migrated PostgreSQL database and an in-process API client (module-wide), and
an in-process name server on each kind of database (per test)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from nameserver_testkit import serve

from graymq.migrations.schema import upgrade


@pytest.fixture(scope="module")
def db_url(pg_url: str) -> str:
    """The module's fresh PostgreSQL database, migrated to head."""
    upgrade(pg_url)
    return pg_url


@pytest.fixture(scope="module")
def api(db_url: str) -> Iterator[TestClient]:
    """The name server app on the module's database (default settings, named tokens ops and ci)."""
    with serve(db_url) as client:
        yield client


@pytest.fixture
def migrated_db(db: str) -> str:
    """An empty database of each kind, migrated to head."""
    upgrade(db)
    return db


@pytest.fixture
def ns(request: pytest.FixtureRequest, migrated_db: str) -> Iterator[TestClient]:
    """The in-process name server on each kind of database: default settings, requests as the admin ``ops``, unless
    the module or the test is marked ``name_server(headers=..., **settings)``, e.g.
    ``pytest.mark.name_server(headers=None, client_expiry_seconds=600)`` (anonymous requests, late expiry); a test's
    mark adds to (and wins over) its module's."""
    options: dict[str, Any] = {}
    for marker in reversed(list(request.node.iter_markers("name_server"))):  # the module's first, the test's last
        options.update(marker.kwargs)
    with serve(migrated_db, **options) as client:
        yield client
