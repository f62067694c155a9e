"""Migrations 0011 and 0012 on SQLite and PostgreSQL add columns in place: brokers registered before 0011 keep
their rows (no gRPC address); principals from before 0012 keep theirs (no access key), an access key is unique
(many principals may have none); downgrading drops only the new columns."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from nameserver_testkit import serve
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


@pytest.mark.parametrize("backend", BACKENDS)
def test_0014_adds_lanes_keeping_every_row_and_its_meaning(backend: str, tmp_path: Path, postgres: Any) -> None:
    with database_at(backend, "0013", tmp_path, postgres) as (url, engine):
        with engine.begin() as db:
            db.exec_driver_sql("INSERT INTO groups (id, name, gray_switch, orphan_policy, created_at, updated_at) "
                               "VALUES (1, 'g', true, 'hold', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)")
            db.exec_driver_sql("INSERT INTO topics (id, name, queue_nums, gray_queue_nums, perm, created_at, "
                               "updated_at) VALUES (1, 'T', 8, 2, 6, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)")
            db.exec_driver_sql(INSERT_BROKER)
            db.exec_driver_sql("INSERT INTO broker_topic_routes (broker_id, topic, queue_nums, gray_queue_nums, perm) "
                               "SELECT id, 'T', 8, 2, 6 FROM brokers")
            db.exec_driver_sql(
                "INSERT INTO clients (group_id, client_id, role, labels, explicit_gray, gray, state, queues, topics, "
                "first_seen, last_seen) VALUES (1, 'c1', 'consumer', '{}', true, true, 'GRAY', '[]', '[\"T\"]', "
                "CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)")
            db.exec_driver_sql("INSERT INTO gray_rules (group_id, selector, gray, position, created_at) "
                               "VALUES (1, '{\"v\": \"2\"}', true, 0, CURRENT_TIMESTAMP)")
        upgrade(url, "0014")
        with engine.begin() as db:
            assert db.exec_driver_sql("SELECT lane_slots FROM topics").all() == [(1,)]
            assert db.exec_driver_sql("SELECT lane_slots FROM broker_topic_routes").all() == [(1,)]
            assert db.exec_driver_sql("SELECT explicit_lane, declared_lane, lane FROM clients").all() == [
                (None, None, None)]  # a true flag naming no lane: the lane gray, as before
            assert db.exec_driver_sql("SELECT group_id, lane FROM gray_rules").all() == [(1, None)]
            db.exec_driver_sql("INSERT INTO gray_rules (group_id, selector, gray, lane, position, created_at) "
                               "VALUES (NULL, '{\"v\": \"3\"}', true, 'v3', 0, CURRENT_TIMESTAMP)")
            db.exec_driver_sql("INSERT INTO lane_slots (topic_id, slot, lane, taken_at, taken_by) "
                               "VALUES (1, 0, 'gray', CURRENT_TIMESTAMP, 'c1')")
        for refused in ("INSERT INTO lane_slots (topic_id, slot, lane, taken_at, taken_by) VALUES "
                        "(1, 0, 'v2', CURRENT_TIMESTAMP, 'x')",
                        "INSERT INTO lane_slots (topic_id, slot, lane, taken_at, taken_by) VALUES "
                        "(1, 1, 'gray', CURRENT_TIMESTAMP, 'x')",
                        "UPDATE topics SET lane_slots = 0",
                        "INSERT INTO group_lanes (group_id, lane, orphan_policy) VALUES (1, 'v2', 'drop')"):
            with pytest.raises(Exception, match="(?i)constraint|unique"), engine.begin() as db:
                db.exec_driver_sql(refused)
        with engine.begin() as db:
            db.exec_driver_sql("DELETE FROM topics")
            assert db.exec_driver_sql("SELECT count(*) FROM lane_slots").scalar() == 0  # slots go with their topic
        downgrade(url, "0013")
        with engine.begin() as db:
            assert db.exec_driver_sql("SELECT count(*) FROM clients").scalar() == 1
            assert db.exec_driver_sql("SELECT group_id FROM gray_rules").all() == [(1,)]  # all-groups rules go


def test_rows_from_before_lanes_are_in_the_gray_lane_after_0014(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ns.db'}"
    upgrade(url, "0013")
    engine = create_db_engine(url)
    try:
        with engine.begin() as db:
            db.exec_driver_sql("INSERT INTO groups (id, name, gray_switch, orphan_policy, created_at, updated_at) "
                               "VALUES (1, 'g', true, 'hold', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)")
            db.exec_driver_sql("INSERT INTO gray_rules (group_id, selector, gray, position, created_at) "
                               "VALUES (1, '{\"v\": \"2\"}', true, 0, CURRENT_TIMESTAMP)")
    finally:
        engine.dispose()
    upgrade(url)
    with serve(url) as ns:
        answer = ns.post("/v1/clients/heartbeat", json={"group": "g", "client_id": "c1", "role": "consumer",
                                                        "labels": {"v": "2"}}).json()
        assert (answer["desired_gray"], answer["desired_lane"]) == (True, "gray")
        [rule] = ns.get("/v1/groups/g/rules").json()
        assert "lane" not in rule and rule["gray"] is True


INSERT_CUTOVER = ("INSERT INTO cutover_operations (group_id, kind, mode, {lane}producer_groups, state, started_by, "
                  "started_at, updated_at) VALUES (1, 'promote', 'drain', {value}'[]', 'RUNNING', 'ops', "
                  "CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)")


@pytest.mark.parametrize("backend", BACKENDS)
def test_0015_runs_one_cutover_per_group_and_lane(backend: str, tmp_path: Path, postgres: Any) -> None:
    with database_at(backend, "0014", tmp_path, postgres) as (url, engine):
        with engine.begin() as db:
            db.exec_driver_sql("INSERT INTO groups (id, name, gray_switch, orphan_policy, created_at, updated_at) "
                               "VALUES (1, 'g', true, 'hold', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)")
            db.exec_driver_sql(INSERT_CUTOVER.format(lane="", value=""))
        upgrade(url, "0015")
        with engine.begin() as db:
            assert db.exec_driver_sql("SELECT lane FROM cutover_operations").all() == [("gray",)]  # as before
            db.exec_driver_sql(INSERT_CUTOVER.format(lane="lane, ", value="'v3', "))  # another lane runs beside it
        with pytest.raises(Exception, match="(?i)constraint|unique"), engine.begin() as db:
            db.exec_driver_sql(INSERT_CUTOVER.format(lane="lane, ", value="'v3', "))
        downgrade(url, "0014")
        with engine.begin() as db:
            assert db.exec_driver_sql("SELECT count(*) FROM cutover_operations").scalar() == 1  # the gray one
