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

from graymq.migrations.schema import MIGRATION_LOCK_KEY, downgrade, schema_status, upgrade
from graymq.nameserver.db import create_db_engine
from graymq.nameserver.models import Base

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
    "broker_sets",
    "broker_replicas",
    "lane_slots",
    "group_lanes",
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


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_0007_keeps_every_row_and_constraint_and_admits_retired_clients_and_rollouts(
    backend: str, tmp_path: Path, postgres: Any
) -> None:
    """On SQLite 0007 copies ``clients`` and ``cutover_operations`` to change their CHECKs: nothing may be lost on
    the way, in those tables or (by a cascade) in others, and the constraints they had must still hold."""
    url = (f"sqlite:///{tmp_path / 'ns.db'}" if backend == "sqlite"
           else postgres.create_database("t_ns_migration_0007"))
    upgrade(url, "0006")
    engine = create_db_engine(url)
    try:
        with engine.begin() as db:
            db.exec_driver_sql("INSERT INTO groups (id, name, gray_switch, orphan_policy, created_at, updated_at) "
                               "VALUES (1, 'g', true, 'hold', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)")
            db.exec_driver_sql(
                "INSERT INTO clients (group_id, client_id, role, labels, gray, state, queues, topics, first_seen, "
                "last_seen) VALUES (1, 'c1', 'consumer', '{}', true, 'GRAY', '[]', '[]', CURRENT_TIMESTAMP, "
                "CURRENT_TIMESTAMP)")
            db.exec_driver_sql("INSERT INTO gray_rules (group_id, selector, gray, position, created_at) "
                               "VALUES (1, '{\"v\": \"2\"}', true, 0, CURRENT_TIMESTAMP)")
            db.exec_driver_sql(
                "INSERT INTO cutover_operations (group_id, kind, mode, producer_groups, state, started_by, "
                "started_at, updated_at) VALUES (1, 'promote', 'drain', '[]', 'SUCCEEDED', 'ops', CURRENT_TIMESTAMP, "
                "CURRENT_TIMESTAMP)")
        upgrade(url)
        assert differences(engine) == []
        with engine.begin() as db:
            counts = {t: db.exec_driver_sql(f"SELECT count(*) FROM {t}").scalar()
                      for t in ("groups", "clients", "gray_rules", "cutover_operations")}
            assert counts == {"groups": 1, "clients": 1, "gray_rules": 1, "cutover_operations": 1}
            assert db.exec_driver_sql("SELECT gray_retired FROM groups").scalar() in (False, 0)
            db.exec_driver_sql("UPDATE clients SET state = 'RETIRED', health = '{}'")
            db.exec_driver_sql(
                "INSERT INTO cutover_operations (group_id, kind, mode, producer_groups, state, started_by, "
                "started_at, updated_at) VALUES (1, 'rollout', 'hold', '[]', 'RUNNING', 'ops', CURRENT_TIMESTAMP, "
                "CURRENT_TIMESTAMP)")
        for refused in ("UPDATE clients SET state = 'ASLEEP'", "UPDATE clients SET role = 'watcher'",
                        "UPDATE cutover_operations SET kind = 'restart'",
                        "INSERT INTO cutover_operations (group_id, kind, mode, producer_groups, state, started_by, "
                        "started_at, updated_at) VALUES (1, 'promote', 'drain', '[]', 'RUNNING', 'ops', "
                        "CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"):
            with pytest.raises(Exception, match="(?i)constraint|unique"), engine.begin() as db:
                db.exec_driver_sql(refused)
    finally:
        engine.dispose()
