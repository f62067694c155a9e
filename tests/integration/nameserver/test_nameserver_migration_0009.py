"""Migration 0009 on SQLite and PostgreSQL: principals stored with the broker right before broker names were bound
keep acting as any broker (``["*"]``), the others get none, and new rows default to none."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from graymq.migrations.schema import downgrade, upgrade
from graymq.nameserver.db import create_db_engine

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_0009_binds_existing_broker_principals_to_any_broker_name(backend: str, tmp_path: Path,
                                                                  postgres: Any) -> None:
    url = (f"sqlite:///{tmp_path / 'ns.db'}" if backend == "sqlite"
           else postgres.create_database("t_ns_migration_0009"))
    upgrade(url, "0008")
    engine = create_db_engine(url)
    insert = ("INSERT INTO principals (name, token_sha256, produce, consume, admin, broker, created_at, updated_at) "
              "VALUES ('{name}', '{digest}', '[]', '[]', false, {broker}, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)")
    try:
        with engine.begin() as db:
            db.exec_driver_sql(insert.format(name="brokers", digest="a" * 64, broker="true"))
            db.exec_driver_sql(insert.format(name="app", digest="b" * 64, broker="false"))
        upgrade(url)
        with engine.begin() as db:
            db.exec_driver_sql(insert.format(name="later", digest="c" * 64, broker="false"))
            rows = db.exec_driver_sql("SELECT name, broker_names FROM principals ORDER BY name").all()
        names = {name: value if isinstance(value, list) else json.loads(value) for name, value in rows}
        assert names == {"app": [], "brokers": ["*"], "later": []}
        downgrade(url, "0008")
    finally:
        engine.dispose()
