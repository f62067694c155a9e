"""Migration 0011 on SQLite and PostgreSQL: brokers registered before it keep their rows (no gRPC address) and a
registration may then store one; downgrading drops only the column."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from graymq.nameserver.db import create_db_engine
from graymq.nameserver.schema import downgrade, upgrade

pytestmark = pytest.mark.integration

INSERT = ("INSERT INTO brokers (broker_name, address, registered_at, last_heartbeat, lease_expires_at) "
          "VALUES ('broker-a', '10.0.0.1:10911', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_0011_adds_the_grpc_address_keeping_every_broker(backend: str, tmp_path: Path, postgres: Any) -> None:
    url = (f"sqlite:///{tmp_path / 'ns.db'}" if backend == "sqlite"
           else postgres.create_database("t_ns_migration_0011"))
    upgrade(url, "0010")
    engine = create_db_engine(url)
    try:
        with engine.begin() as db:
            db.exec_driver_sql(INSERT)
        upgrade(url, "0011")
        with engine.begin() as db:
            assert db.exec_driver_sql("SELECT broker_name, grpc_address FROM brokers").all() == [("broker-a", None)]
            db.exec_driver_sql("UPDATE brokers SET grpc_address = '10.0.0.1:8081'")
        downgrade(url, "0010")
        with engine.begin() as db:
            assert db.exec_driver_sql("SELECT broker_name, address FROM brokers").all() == [
                ("broker-a", "10.0.0.1:10911")]
    finally:
        engine.dispose()
