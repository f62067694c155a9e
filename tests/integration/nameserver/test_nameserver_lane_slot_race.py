"""Two lanes' first clients racing for a topic's last lane slot: exactly one gets it, the other the one-line refusal
(PostgreSQL: the topic row's lock; SQLite: the database's write lock), through the service and through heartbeats."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from threading import Barrier

import pytest
from nameserver_testkit import make_settings, serve

from graymq.nameserver.db import create_db_engine, session_factory
from graymq.nameserver.errors import Conflict
from graymq.nameserver.models import Topic
from graymq.nameserver.services.lanes import LaneService

pytestmark = pytest.mark.integration
ROUNDS = 30


def test_two_lanes_racing_for_the_last_slot_never_both_get_it(migrated_db: str) -> None:
    settings = make_settings(migrated_db)
    engine = create_db_engine(migrated_db)
    sessions = session_factory(engine)
    try:
        with sessions() as session:
            session.add_all([Topic(name=f"T{n}", queue_nums=8, gray_queue_nums=2, perm=6, lane_slots=2)
                             for n in range(ROUNDS)])
            session.commit()

        def take(topic: str, lane: str, barrier: Barrier) -> str:
            with sessions() as session:
                service = LaneService(session, settings)
                row = session.query(Topic).filter_by(name=topic).one()
                service.take(row, "v1", "first")  # both take v1's slot (one does, the other finds it held)
                session.commit()
                barrier.wait()
                try:
                    service.take(row, lane, f"c-{lane}")
                    session.commit()
                    return "taken"
                except Conflict as refused:
                    session.rollback()
                    return str(refused.detail)

        with ThreadPoolExecutor(2) as pool:
            for n in range(ROUNDS):
                barrier = Barrier(2)
                outcomes = [pool.submit(take, f"T{n}", lane, barrier) for lane in ("v2", "v3")]
                results = [outcome.result(60) for outcome in outcomes]
                assert results.count("taken") == 1, results
                [refusal] = [r for r in results if r != "taken"]
                assert refusal.startswith(f"topic T{n} has no free lane slot (2 of 2 held by v1, v"), results
        with sessions() as session:
            service = LaneService(session, settings)
            assert all(sorted(lanes.values()) == [0, 1] for lanes in service.slot_maps().values())
    finally:
        engine.dispose()


def test_first_heartbeats_of_two_lanes_racing_for_the_last_slot_get_one_slot(migrated_db: str) -> None:
    with serve(migrated_db) as ns:
        ns.put("/v1/topics/T_RACE", json={"queue_nums": 8, "gray_queue_nums": 2, "lane_slots": 1})

        def first_beat(client_id: str, lane: str, barrier: Barrier) -> int:
            body = {"group": "G", "client_id": client_id, "role": "consumer", "topics": ["T_RACE"],
                    "declared_lane": lane}
            barrier.wait()
            return ns.post("/v1/clients/heartbeat", json=body).status_code

        barrier = Barrier(2)
        with ThreadPoolExecutor(2) as pool:
            codes = sorted(f.result(60) for f in [pool.submit(first_beat, f"c-{lane}", lane, barrier)
                                                  for lane in ("v2", "v3")])
        assert codes == [200, 409]
        assert len(ns.get("/v1/groups/G/clients").json()["clients"]) == 1
