"""Alembic migrations: empty → head → base on PostgreSQL, head on SQLite, and the models match them."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from nameserver_testkit import wait_until
from sqlalchemy import Engine, inspect

from graymq.nameserver.db import create_db_engine
from graymq.nameserver.models import Base
from graymq.nameserver.schema import MIGRATION_LOCK_KEY, downgrade, schema_status, upgrade

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
    "deletions",
    "principals",
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


def test_migrations_wait_for_the_advisory_lock_so_concurrent_migrators_run_one_at_a_time(
    postgres: Any,
) -> None:
    url = postgres.create_database("t_ns_migration_lock")
    dsn = postgres.dsn("t_ns_migration_lock")
    with psycopg.connect(dsn, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
        migrator = threading.Thread(target=upgrade, args=(url,))
        migrator.start()
        wait_until(lambda: waiting_for_advisory_lock(dsn), what="the migration waiting for the lock")
        engine = create_db_engine(url)
        try:
            assert tables(engine) == set()
            holder.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
            migrator.join(60)
            assert schema_status(engine).up_to_date
        finally:
            engine.dispose()


def waiting_for_advisory_lock(dsn: str) -> bool:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory'"
        ).fetchone()
    return bool(row and row[0])
