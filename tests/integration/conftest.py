"""Fixtures for integration tests that run on either database the name server supports."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database of each kind (test ids ``[sqlite]`` and ``[postgresql]``): a SQLite file in the test's
    directory, or a PostgreSQL database of the test's own."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/ns.db"
    return str(request.getfixturevalue("fresh_pg_url"))
