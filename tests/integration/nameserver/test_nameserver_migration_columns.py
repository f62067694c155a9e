"""Migrations 0011 and 0012 on SQLite and PostgreSQL add columns in place: brokers registered before 0011 keep
their rows (no gRPC address); principals from before 0012 keep theirs (no access key), an access key is unique
(many principals may have none); downgrading drops only the new columns."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from graymq.migrations.schema import downgrade, upgrade
from graymq.nameserver.db import create_db_engine

pytestmark = pytest.mark.integration
BACKENDS = ["sqlite", "postgres"]

INSERT_BROKER = ("INSERT INTO brokers (broker_name, address, registered_at, last_heartbeat, lease_expires_at) "
                 "VALUES ('broker-a', '10.0.0.1:10911', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)")
INSERT_PRINCIPAL = ("INSERT INTO principals (name, token_sha256, produce, consume, admin, broker, broker_names, "
                    "created_at, updated_at) VALUES ('{name}', '{digest}', '[]', '[]', false, false, '[]', "
                    "CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)")


@contextmanager
def database_at(backend: str, revision: str, tmp_path: Path, postgres: Any) -> Iterator[tuple[str, Engine]]:
    """A fresh database of ``backend`` migrated to ``revision``: its URL and an engine (disposed at exit)."""
    url = (f"sqlite:///{tmp_path / 'ns.db'}" if backend == "sqlite"
           else postgres.create_database(f"t_ns_migration_{revision}"))
    upgrade(url, revision)
    engine = create_db_engine(url)
    try:
        yield url, engine
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", BACKENDS)
def test_0011_adds_the_grpc_address_keeping_every_broker(backend: str, tmp_path: Path, postgres: Any) -> None:
    with database_at(backend, "0010", tmp_path, postgres) as (url, engine):
        with engine.begin() as db:
            db.exec_driver_sql(INSERT_BROKER)
        upgrade(url, "0011")
        with engine.begin() as db:
            assert db.exec_driver_sql("SELECT broker_name, grpc_address FROM brokers").all() == [("broker-a", None)]
            db.exec_driver_sql("UPDATE brokers SET grpc_address = '10.0.0.1:8081'")
        downgrade(url, "0010")
        with engine.begin() as db:
            assert db.exec_driver_sql("SELECT broker_name, address FROM brokers").all() == [
                ("broker-a", "10.0.0.1:10911")]


@pytest.mark.parametrize("backend", BACKENDS)
def test_0012_adds_unique_access_keys_keeping_every_principal(backend: str, tmp_path: Path, postgres: Any) -> None:
    with database_at(backend, "0011", tmp_path, postgres) as (url, engine):
        with engine.begin() as db:
            db.exec_driver_sql(INSERT_PRINCIPAL.format(name="a", digest="a" * 64))
            db.exec_driver_sql(INSERT_PRINCIPAL.format(name="b", digest="b" * 64))
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
