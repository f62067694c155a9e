"""The test harness itself: the Postgres fixture is a real server, graymq commands start."""

from __future__ import annotations

import subprocess
import sys

import psycopg
import pytest

pytestmark = pytest.mark.integration


def test_postgres_fixture_is_a_real_postgresql_server(postgres, pg_url):
    with psycopg.connect(postgres.dsn("postgres")) as conn:
        version = conn.execute("SHOW server_version").fetchone()[0]
        assert int(version.split(".")[0]) >= 12
        assert "PostgreSQL" in conn.execute("SELECT version()").fetchone()[0]
    database = pg_url.rsplit("/", 1)[1]
    with psycopg.connect(postgres.dsn(database)) as conn:
        assert conn.execute("SELECT current_database()").fetchone()[0] == database


def test_graymq_help_lists_commands():
    result = subprocess.run([sys.executable, "-m", "graymq.gray_controller.cli", "--help"],
                            capture_output=True, text=True)
    assert result.returncode == 0
    assert "graymq" in result.stdout
