"""POST /v1/clients/watch: a long poll that returns when a client's desired flag, switch or orphan policy changes.

Watches run in threads against real name server processes. They ask for the longest timeout
while the HTTP client gives up after half of it: a watch that was not woken by the change fails
with a read timeout instead of answering the new state at its own timeout.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from nameserver_testkit import ADMIN_TOKENS, OPS, client_heartbeat, wait_until

from graymq.devkit.processes import GraymqProcess

pytestmark = pytest.mark.integration

StartProcess = Callable[..., GraymqProcess]
WATCH_S = 60.0  # the longest watch the name server allows
CLIENT_S = 30.0  # the HTTP client's patience: a watch must be woken, not time out


def start_nameserver(graymq_process: StartProcess, db: str, *args: str) -> httpx.Client:
    proc = graymq_process("nameserver", "--port", "0", "--db", db, *args, env={"GRAYMQ_ADMIN_TOKENS": ADMIN_TOKENS})
    assert proc.ready_info is not None
    return httpx.Client(base_url=proc.ready_info["url"], headers=OPS, timeout=CLIENT_S)


def known(view: dict[str, Any]) -> dict[str, Any]:
    return {k: view[k] for k in ("desired_gray", "gray_switch", "orphan_policy")}


def watch(http: httpx.Client | TestClient, group: str, client_id: str, known_state: dict[str, Any] | None,
          timeout_s: float = WATCH_S, role: str = "consumer") -> httpx.Response:
    body = {"group": group, "client_id": client_id, "role": role, "known": known_state, "timeout_s": timeout_s}
    return http.post("/v1/clients/watch", json=body)


@pytest.fixture
def pool() -> Iterator[concurrent.futures.ThreadPoolExecutor]:
    with concurrent.futures.ThreadPoolExecutor(4) as executor:
        yield executor


def test_without_known_state_a_watch_answers_at_once_what_a_heartbeat_would(api: TestClient) -> None:
    beat = client_heartbeat(api, "watch_now", "c1", labels={"v": "2"}, topics=[], declared_gray=True)
    response = watch(api, "watch_now", "c1", None)
    assert response.status_code == 200, response.text
    assert response.json() == beat


def test_a_watch_whose_state_is_already_stale_answers_at_once(api: TestClient) -> None:
    beat = client_heartbeat(api, "watch_stale", "c1")
    stale = {**known(beat), "desired_gray": not beat["desired_gray"]}
    assert watch(api, "watch_stale", "c1", stale).json()["desired_gray"] == beat["desired_gray"]


def test_an_unchanged_watch_answers_the_same_state_at_its_timeout(api: TestClient) -> None:
    beat = client_heartbeat(api, "watch_idle", "c1")
    assert known(watch(api, "watch_idle", "c1", known(beat), timeout_s=0.2).json()) == known(beat)


def test_bad_watches_are_clear_errors(api: TestClient) -> None:
    client_heartbeat(api, "watch_bad", "c1")
    unknown = watch(api, "watch_bad", "nobody", None)
    assert unknown.status_code == 404
    assert "heartbeat first" in unknown.json()["error"]
    assert watch(api, "no_such_group", "c1", None).status_code == 404
    assert watch(api, "watch_bad", "c1", None, role="producer").status_code == 404  # only its consumer role is known
    too_long = watch(api, "watch_bad", "c1", None, timeout_s=3600)
    assert too_long.status_code == 422
    assert too_long.json()["detail"][0]["loc"] == ["body", "timeout_s"]
    assert api.post("/v1/clients/watch", json={"group": "watch_bad"}).status_code == 422


@pytest.mark.parametrize("change", ["flag", "rule", "switch", "orphan_policy"])
def test_each_kind_of_change_wakes_the_watch_of_the_replica_that_made_it(
    graymq_process: StartProcess, db_url: str, pool: concurrent.futures.ThreadPoolExecutor, change: str
) -> None:
    group = f"watch_{change}"
    with start_nameserver(graymq_process, db_url) as ns:
        beat = client_heartbeat(ns, group, "c1", labels={"version": "v2"})
        assert beat["desired_gray"] is False
        pending = pool.submit(watch, ns, group, "c1", known(beat))
        changes = {
            "flag": lambda: ns.put(f"/v1/groups/{group}/clients/c1/flag", json={"gray": True}, headers=OPS),
            "rule": lambda: ns.post(f"/v1/groups/{group}/rules", json={"selector": {"version": "v2"}, "gray": True},
                                    headers=OPS),
            "switch": lambda: ns.put(f"/v1/groups/{group}/switch", json={"enabled": False}, headers=OPS),
            "orphan_policy": lambda: ns.put(f"/v1/groups/{group}/orphan-policy", json={"policy": "adopt"},
                                            headers=OPS),
        }
        assert changes[change]().is_success
        answer = pending.result(WATCH_S)
        assert answer.status_code == 200, answer.text
        assert known(answer.json()) != known(beat)


def test_a_change_through_one_replica_wakes_a_watch_on_the_other(
    graymq_process: StartProcess, db_url: str, pool: concurrent.futures.ThreadPoolExecutor
) -> None:
    with (
        start_nameserver(graymq_process, db_url) as a,
        start_nameserver(graymq_process, db_url) as b,
    ):
        beat = client_heartbeat(a, "watch_replicas", "c1")
        on_a = pool.submit(watch, a, "watch_replicas", "c1", known(beat))
        on_b = pool.submit(watch, b, "watch_replicas", "c1", known(beat))
        assert b.put("/v1/groups/watch_replicas/clients/c1/flag", json={"gray": True}, headers=OPS).is_success
        for pending in (on_a, on_b):
            assert pending.result(WATCH_S).json()["desired_gray"] is True


def test_a_watch_on_the_sqlite_quick_start_is_woken_too(
    graymq_process: StartProcess, tmp_path: Path, pool: concurrent.futures.ThreadPoolExecutor
) -> None:
    with start_nameserver(graymq_process, f"sqlite:///{tmp_path}/ns.db", "--migrate") as ns:
        beat = client_heartbeat(ns, "watch_sqlite", "c1")
        pending = pool.submit(watch, ns, "watch_sqlite", "c1", known(beat))
        assert ns.put("/v1/groups/watch_sqlite/clients/c1/flag", json={"gray": True}, headers=OPS).is_success
        assert pending.result(WATCH_S).json()["desired_gray"] is True


def test_stopping_the_name_server_answers_open_watches_instead_of_cutting_them(
    graymq_process: StartProcess, db_url: str, pool: concurrent.futures.ThreadPoolExecutor
) -> None:
    proc = graymq_process("nameserver", "--port", "0", "--db", db_url, env={"GRAYMQ_ADMIN_TOKENS": ADMIN_TOKENS})
    assert proc.ready_info is not None
    with httpx.Client(base_url=proc.ready_info["url"], headers=OPS, timeout=CLIENT_S) as ns:
        beat = client_heartbeat(ns, "watch_stop", "c1")
        pending = pool.submit(watch, ns, "watch_stop", "c1", known(beat))
        wait_until(lambda: open_watches(ns) == 1, 30, "the watch waiting")
        assert proc.terminate() == 0
        answer = pending.result(WATCH_S)
        assert answer.status_code == 200
        assert known(answer.json()) == known(beat)


def test_a_database_outage_while_listening_is_survived(
    graymq_process: StartProcess, fresh_pg_url: str, pool: concurrent.futures.ThreadPoolExecutor
) -> None:
    """The LISTEN connection dies with every backend; once it is back, watches are woken again."""
    with start_nameserver(graymq_process, fresh_pg_url, "--migrate") as ns:
        beat = client_heartbeat(ns, "watch_outage", "c1")
        terminate_backends(fresh_pg_url)
        pending = pool.submit(watch, ns, "watch_outage", "c1", known(beat))
        wait_until(lambda: listening(fresh_pg_url), 30, "the name server listening again")
        assert ns.put("/v1/groups/watch_outage/clients/c1/flag", json={"gray": True}, headers=OPS).is_success
        assert pending.result(WATCH_S).json()["desired_gray"] is True


def open_watches(ns: httpx.Client) -> int:
    (line,) = [x for x in ns.get("/metrics").text.splitlines() if x.startswith("graymq_nameserver_open_watches ")]
    return int(float(line.split()[1]))


def _sql(db_url: str, statement: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
        return list(conn.execute(statement).fetchall())  # type: ignore[arg-type]


def terminate_backends(db_url: str) -> None:
    _sql(db_url, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                 "WHERE datname = current_database() AND pid <> pg_backend_pid()")


def listening(db_url: str) -> bool:
    rows = _sql(db_url, "SELECT count(*) FROM pg_stat_activity "
                        "WHERE application_name = 'graymq-nameserver-listen' AND datname = current_database()")
    return bool(rows[0][0])
