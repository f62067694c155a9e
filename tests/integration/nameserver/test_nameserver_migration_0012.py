"""Migration 0012 on SQLite and PostgreSQL: principals from before keep their rows without an access key; an access
key is unique (many principals may have none); downgrading drops only the new columns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from graymq.nameserver.db import create_db_engine
from graymq.nameserver.schema import downgrade, upgrade

pytestmark = pytest.mark.integration

INSERT = ("INSERT INTO principals (name, token_sha256, produce, consume, admin, broker, broker_names, created_at, "
          "updated_at) VALUES ('{name}', '{digest}', '[]', '[]', false, false, '[]', CURRENT_TIMESTAMP, "
          "CURRENT_TIMESTAMP)")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_0012_adds_unique_access_keys_keeping_every_principal(backend: str, tmp_path: Path, postgres: Any) -> None:
    url = (f"sqlite:///{tmp_path / 'ns.db'}" if backend == "sqlite"
           else postgres.create_database("t_ns_migration_0012"))
    upgrade(url, "0011")
    engine = create_db_engine(url)
    try:
        with engine.begin() as db:
            db.exec_driver_sql(INSERT.format(name="a", digest="a" * 64))
            db.exec_driver_sql(INSERT.format(name="b", digest="b" * 64))
        upgrade(url, "0012")
        with engine.begin() as db:
            assert db.exec_driver_sql("SELECT name, access_key, secret_key FROM principals ORDER BY name").all() == [
                ("a", None, None), ("b", None, None)]
            db.exec_driver_sql("UPDATE principals SET access_key = 'GMQAK1', secret_key = 's' WHERE name = 'a'")
        with pytest.raises(Exception, match="(?i)unique"), engine.begin() as db:
            db.exec_driver_sql("UPDATE principals SET access_key = 'GMQAK1' WHERE name = 'b'")
        downgrade(url, "0011")
        with engine.begin() as db:
            assert db.exec_driver_sql("SELECT count(*) FROM principals").scalar() == 2
    finally:
        engine.dispose()
