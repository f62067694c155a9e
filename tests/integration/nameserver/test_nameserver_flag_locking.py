"""Row locks serialize what must not interleave: flag changes on one group (a lock on the group's row), and a
broker's registration against a topic deletion (locks on the broker rows)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import psycopg
import pytest
from nameserver_testkit import ADMIN_TOKENS, OPS, broker_heartbeat, client_heartbeat, wait_until

from graymq.devkit.processes import GraymqProcess

pytestmark = pytest.mark.integration


@pytest.fixture
def api(graymq_process: Callable[..., GraymqProcess], db_url: str) -> httpx.Client:
    proc = graymq_process(
        "nameserver", "--port", "0", "--db", db_url, env={"GRAYMQ_ADMIN_TOKENS": ADMIN_TOKENS}
    )
    assert proc.ready_info is not None
    return httpx.Client(base_url=proc.ready_info["url"], headers=OPS, timeout=30)


def waiting_on_a_lock(dsn: str) -> bool:
    """Whether a name server connection is blocked on a row lock right now."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE application_name = 'graymq-nameserver' AND wait_event_type = 'Lock'"
        ).fetchone()
    return bool(row and row[0])


def test_a_flag_change_waits_for_the_group_row_lock(api: httpx.Client, postgres: Any, db_url: str) -> None:
    client_heartbeat(api, "locked_group", "c1")
    dsn = postgres.dsn(db_url.rsplit("/", 1)[1])
    result: dict[str, httpx.Response] = {}
    with psycopg.connect(dsn) as holder:
        holder.execute("SELECT id FROM groups WHERE name = 'locked_group' FOR UPDATE")
        flip = threading.Thread(
            target=lambda: result.setdefault(
                "response",
                api.put("/v1/groups/locked_group/clients/c1/flag", json={"gray": True}, headers=OPS),
            )
        )
        flip.start()
        wait_until(lambda: waiting_on_a_lock(dsn), what="the flip blocking on the group lock")
        assert "response" not in result
        holder.rollback()
    flip.join(30)
    assert result["response"].status_code == 200
    assert not waiting_on_a_lock(dsn)


def test_concurrent_flips_of_one_group_form_one_consistent_history(api: httpx.Client) -> None:
    """Each audited flip saw the previous one's result: no two flips read the same ``before``."""
    client_heartbeat(api, "busy_group", "c1")
    values = [True, False, None] * 8

    def flip(i: int) -> int:
        body = {"gray": values[i], "reason": f"flip {i}"}
        return api.put("/v1/groups/busy_group/clients/c1/flag", json=body, headers=OPS).status_code

    with ThreadPoolExecutor(max_workers=12) as pool:
        assert set(pool.map(flip, range(len(values)))) == {200}
    history = list(reversed(api.get("/v1/audit", params={"group": "busy_group", "limit": 100}).json()))
    assert len(history) == len(values)
    previous: bool | None = None
    for entry in history:
        assert entry["before"]["explicit_gray"]["consumer"] is previous, history
        previous = entry["after"]["explicit_gray"]["consumer"]
    (row,) = api.get("/v1/groups/busy_group/clients").json()["clients"]
    assert row["explicit_gray"] is previous


def test_a_registration_that_waited_on_a_topic_deletion_does_not_recreate_the_topic(
    api: httpx.Client, postgres: Any, db_url: str
) -> None:
    """A broker still reporting a topic while its deletion commits: the registration blocked on the broker rows
    that the deletion locks must read the deletion after the lock, not before (it used to re-create the topic)."""
    broker_heartbeat(api, "broker-a", ("%RETRY%GID_GONE", 2, 0))
    assert "%RETRY%GID_GONE" in {t["topic"] for t in api.get("/v1/topics").json()}
    dsn = postgres.dsn(db_url.rsplit("/", 1)[1])
    result: dict[str, Any] = {}
    with psycopg.connect(dsn) as deletion:  # what a topic deletion does, held open at its commit
        deletion.execute("SELECT id FROM brokers ORDER BY id FOR UPDATE")
        deletion.execute("DELETE FROM topics WHERE name = '%RETRY%GID_GONE'")
        deletion.execute("DELETE FROM broker_topic_routes WHERE topic = '%RETRY%GID_GONE'")
        deletion.execute("INSERT INTO deletions (kind, name, deleted_at) VALUES ('topic', '%RETRY%GID_GONE', now())")
        registration = threading.Thread(
            target=lambda: result.setdefault("answer", broker_heartbeat(api, "broker-a", ("%RETRY%GID_GONE", 2, 0)))
        )
        registration.start()
        wait_until(lambda: waiting_on_a_lock(dsn), what="the registration blocking on the broker rows")
        deletion.commit()
    registration.join(30)
    assert [d["name"] for d in result["answer"]["deletions"]] == ["%RETRY%GID_GONE"]
    assert "%RETRY%GID_GONE" not in {t["topic"] for t in api.get("/v1/topics").json()}


def test_a_flag_change_and_a_heartbeat_joining_a_lane_do_not_deadlock(
        api: httpx.Client, postgres: Any, db_url: str) -> None:
    """A heartbeat locks its client row, then records the group taking part in a lane (a row whose foreign key
    share-locks the group's row); a flip locks the group's row, then writes the client row. With the group locked
    FOR UPDATE the two waited for each other and PostgreSQL aborted one ("deadlock detected", a 503 in CI); the
    flip's FOR NO KEY UPDATE does not conflict with the key share, so both go through, the flip after the beat."""
    client_heartbeat(api, "lane_group", "c1")
    dsn = postgres.dsn(db_url.rsplit("/", 1)[1])
    result: dict[str, httpx.Response] = {}
    with psycopg.connect(dsn) as beat:
        group_id = beat.execute("SELECT id FROM groups WHERE name = 'lane_group'").fetchone()[0]  # type: ignore[index]
        beat.execute("UPDATE clients SET last_seen = now() WHERE group_id = %s AND client_id = 'c1'", (group_id,))
        flip = threading.Thread(target=lambda: result.setdefault(
            "response", api.put("/v1/groups/lane_group/clients/c1/flag", json={"gray": True}, headers=OPS)))
        flip.start()
        wait_until(lambda: waiting_on_a_lock(dsn), what="the flip blocking on the client row")
        beat.execute("INSERT INTO group_lanes (group_id, lane, joined_at) VALUES (%s, 'blue', now()) "
                     "ON CONFLICT DO NOTHING", (group_id,))
        beat.commit()
    flip.join(30)
    assert result["response"].status_code == 200, result["response"].text
    assert result["response"].json()["explicit_gray"] is True
