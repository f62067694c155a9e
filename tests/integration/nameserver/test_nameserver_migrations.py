"""Alembic migrations: empty → head → base on PostgreSQL, head on SQLite, and the models match them."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, inspect

from nameserver.db import create_db_engine
from nameserver.models import Base
from nameserver.schema import downgrade, schema_status, upgrade

pytestmark = pytest.mark.integration

TABLES = {
    "brokers",
    "broker_topic_routes",
    "topics",
    "groups",
    "clients",
    "gray_rules",
    "cutover_operations",
    "audit_log",
}


def tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names()) - {"alembic_version"}


def differences(engine: Engine) -> list[object]:
    """What autogenerate would change to make the database match the models (empty: they agree)."""
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        return list(compare_metadata(context, Base.metadata))


def test_postgres_upgrades_from_empty_to_head_and_downgrades_to_base(pg_url: str) -> None:
    engine = create_db_engine(pg_url)
    try:
        assert tables(engine) == set()
        assert not schema_status(engine).up_to_date
        upgrade(pg_url)
        assert tables(engine) == TABLES
        assert schema_status(engine).up_to_date
        assert differences(engine) == []
        downgrade(pg_url)
        assert tables(engine) == set()
        assert schema_status(engine).current == ()
        upgrade(pg_url)
        assert schema_status(engine).up_to_date
    finally:
        engine.dispose()


def test_sqlite_upgrades_to_head_creating_the_file_directory(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'nested' / 'dir' / 'nameserver.db'}"
    upgrade(url)
    engine = create_db_engine(url)
    try:
        assert (tmp_path / "nested" / "dir" / "nameserver.db").is_file()
        assert tables(engine) == TABLES
        assert schema_status(engine).up_to_date
        assert differences(engine) == []
    finally:
        engine.dispose()
