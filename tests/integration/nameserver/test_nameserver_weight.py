"""A group's weight through the REST API, on SQLite and PostgreSQL: stored (0 by default), shown in the group views
and heartbeat answers, changed by admins only within 0..100, audited, and waking the group's watches; the
migration adding it keeps every group, rule and client."""

from __future__ import annotations

import concurrent.futures
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from nameserver_testkit import ADMIN_TOKENS, OPS, client_heartbeat, wait_until

from graymq.devkit.processes import GraymqProcess
from graymq.migrations.schema import upgrade
from graymq.nameserver.db import create_db_engine

pytestmark = pytest.mark.integration

StartProcess = Callable[..., GraymqProcess]
WATCH_S = 60.0  # the longest watch the name server allows
CLIENT_S = 30.0  # the HTTP client's patience: a watch must be woken, not time out


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def put_weight(http: TestClient | httpx.Client, group: str, body: Any, headers: dict[str, str] = OPS) -> Any:
    return http.put(f"/v1/groups/{group}/weight", json=body, headers=headers)


def weights_shown(ns: TestClient, group: str) -> dict[str, int]:
    """The weight as every view of the group shows it."""
    listed = {g["group"]: g for g in ns.get("/v1/groups").json()}
    return {
        "detail": ns.get(f"/v1/groups/{group}").json()["gray_weight"],
        "list": listed[group]["gray_weight"],
        "clients": ns.get(f"/v1/groups/{group}/clients").json()["gray_weight"],
        "heartbeat": client_heartbeat(ns, group, "c1")["gray_weight"],
    }


def test_weight_defaults_to_0_and_is_shown_by_every_group_view_and_heartbeat_answer(ns: TestClient) -> None:
    group = unique("g")
    client_heartbeat(ns, group, "c1")
    assert weights_shown(ns, group) == dict.fromkeys(("detail", "list", "clients", "heartbeat"), 0)
    answer = put_weight(ns, group, {"weight": 50, "reason": "canary 50%"})
    assert answer.status_code == 200, answer.text
    assert (answer.json()["group"], answer.json()["gray_weight"], answer.json()["gray_switch"]) == (group, 50, True)
    assert weights_shown(ns, group) == dict.fromkeys(("detail", "list", "clients", "heartbeat"), 50)
    assert put_weight(ns, group, {"weight": 0}).json()["gray_weight"] == 0
    assert weights_shown(ns, group)["heartbeat"] == 0


def test_setting_a_weight_creates_a_group_not_known_yet(ns: TestClient) -> None:
    group = unique("g")
    assert put_weight(ns, group, {"weight": 100}).status_code == 200
    assert ns.get(f"/v1/groups/{group}").json()["gray_weight"] == 100


def test_weight_changes_are_audited_with_actor_before_after_and_reason(ns: TestClient) -> None:
    group = unique("g")
    put_weight(ns, group, {"weight": 25, "reason": "step 1"})
    put_weight(ns, group, {"weight": 50})
    entries = ns.get("/v1/audit", params={"group": group}).json()
    assert [(e["actor"], e["object_type"], e["object_id"], e["action"], e["before"], e["after"], e["reason"])
            for e in entries] == [
        ("ops", "group", group, "set_weight", {"gray_weight": 25}, {"gray_weight": 50}, None),
        ("ops", "group", group, "set_weight", {"gray_weight": 0}, {"gray_weight": 25}, "step 1"),
    ]


@pytest.mark.parametrize("weight", [-1, 101, 1000, 50.5, "50", True, None])
def test_a_weight_outside_0_to_100_or_not_a_whole_number_is_422_and_changes_nothing(
    ns: TestClient, weight: Any
) -> None:
    group = unique("g")
    put_weight(ns, group, {"weight": 10})
    refused = put_weight(ns, group, {"weight": weight})
    assert refused.status_code == 422, refused.text
    assert [e["loc"] for e in refused.json()["detail"]] == [["body", "weight"]]
    assert ns.get(f"/v1/groups/{group}").json()["gray_weight"] == 10
    assert len(ns.get("/v1/audit", params={"group": group}).json()) == 1


def test_a_weight_body_without_weight_is_422(ns: TestClient) -> None:
    refused = put_weight(ns, unique("g"), {"reason": "no weight"})
    assert refused.status_code == 422
    assert refused.json()["detail"][0]["loc"] == ["body", "weight"]


def test_only_admins_set_a_weight(ns: TestClient) -> None:
    group = unique("g")
    added = ns.post("/v1/principals", json={"name": unique("app"), "consume": [group]})
    assert added.status_code == 201, added.text
    consumer = {"Authorization": f"Bearer {added.json()['token']}"}
    client_heartbeat(ns, group, "c1")
    forbidden = put_weight(ns, group, {"weight": 50}, headers=consumer)
    assert forbidden.status_code == 403, forbidden.text
    assert forbidden.json()["error"] == "FORBIDDEN"
    assert "admin" in forbidden.json()["detail"]
    assert put_weight(ns, group, {"weight": 50}, headers={"Authorization": ""}).status_code == 401
    assert ns.get(f"/v1/groups/{group}").json()["gray_weight"] == 0
    assert [e["action"] for e in ns.get("/v1/audit", params={"group": group}).json()] == []


# -- watches ------------------------------------------------------------------------------------


@pytest.fixture
def served(graymq_process: StartProcess, db: str) -> Iterator[httpx.Client]:
    """A name server process on the database."""
    proc = graymq_process("nameserver", "--port", "0", "--db", db, "--migrate",
                          env={"GRAYMQ_ADMIN_TOKENS": ADMIN_TOKENS, "GRAYMQ_DEV_MODE": "false"})
    assert proc.ready_info is not None
    with httpx.Client(base_url=proc.ready_info["url"], headers=OPS, timeout=CLIENT_S) as http:
        yield http


@pytest.fixture
def pool() -> Iterator[concurrent.futures.ThreadPoolExecutor]:
    with concurrent.futures.ThreadPoolExecutor(2) as executor:
        yield executor


def watch(http: httpx.Client, group: str, known: dict[str, Any]) -> httpx.Response:
    body = {"group": group, "client_id": "c1", "role": "consumer", "known": known, "timeout_s": WATCH_S}
    return http.post("/v1/clients/watch", json=body)


def open_watches(http: httpx.Client) -> float:
    lines = [line for line in http.get("/metrics").text.splitlines()
             if line.startswith("graymq_nameserver_open_watches ")]
    return float(lines[0].split()[1]) if lines else 0.0


def watched(answer: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: answer[k] for k in ("desired_gray", "gray_switch", "orphan_policy", *keys)}


def test_a_weight_change_wakes_a_watch_that_knows_the_weight(
    served: httpx.Client, pool: concurrent.futures.ThreadPoolExecutor
) -> None:
    group = unique("g")
    beat = client_heartbeat(served, group, "c1")
    pending = pool.submit(watch, served, group, watched(beat, "gray_weight"))
    wait_until(lambda: open_watches(served) >= 1, what="the watch waiting")
    assert put_weight(served, group, {"weight": 50}).status_code == 200
    answer = pending.result(WATCH_S)
    assert answer.status_code == 200, answer.text
    assert answer.json()["gray_weight"] == 50


def test_a_watch_that_does_not_know_the_weight_is_not_answered_for_it(
    served: httpx.Client, pool: concurrent.futures.ThreadPoolExecutor
) -> None:
    """A client that does not act on weights is not answered at once for a weight it never reported knowing:
    its watch waits for what it watches (here the switch)."""
    group = unique("g")
    client_heartbeat(served, group, "c1")
    assert put_weight(served, group, {"weight": 50}).status_code == 200
    beat = client_heartbeat(served, group, "c1")
    pending = pool.submit(watch, served, group, watched(beat))
    wait_until(lambda: open_watches(served) >= 1, what="the watch waiting")
    assert served.put(f"/v1/groups/{group}/switch", json={"enabled": False}).status_code == 200
    answer = pending.result(WATCH_S)
    assert answer.status_code == 200, answer.text
    assert (answer.json()["gray_switch"], answer.json()["gray_weight"]) == (False, 50)


def test_a_watch_knowing_a_stale_weight_answers_at_once(served: httpx.Client) -> None:
    group = unique("g")
    client_heartbeat(served, group, "c1")
    assert put_weight(served, group, {"weight": 30}).status_code == 200
    beat = client_heartbeat(served, group, "c1")
    answer = watch(served, group, {**watched(beat), "gray_weight": 0})
    assert answer.json()["gray_weight"] == 30


def test_a_watch_knowing_an_impossible_weight_is_422(served: httpx.Client) -> None:
    group = unique("g")
    beat = client_heartbeat(served, group, "c1")
    refused = watch(served, group, {**watched(beat), "gray_weight": 101})
    assert refused.status_code == 422
    assert refused.json()["detail"][0]["loc"] == ["body", "known", "gray_weight"]


# -- migration --------------------------------------------------------------------------------


def test_the_weight_migration_keeps_every_group_rule_and_client_and_starts_them_at_0(db: str) -> None:
    upgrade(db, "0005")
    now = datetime.now(UTC)
    groups = sa.table("groups", sa.column("id"), sa.column("name"), sa.column("gray_switch"),
                      sa.column("orphan_policy"), sa.column("created_at"), sa.column("updated_at"))
    rules = sa.table("gray_rules", sa.column("group_id"), sa.column("selector", sa.JSON),
                     sa.column("gray"), sa.column("position"), sa.column("created_at"))
    clients = sa.table("clients", sa.column("group_id"), sa.column("client_id"), sa.column("role"),
                       sa.column("labels", sa.JSON), sa.column("gray"), sa.column("state"),
                       sa.column("queues", sa.JSON), sa.column("topics", sa.JSON), sa.column("first_seen"),
                       sa.column("last_seen"))
    engine = create_db_engine(db)
    try:
        with engine.begin() as conn:
            conn.execute(groups.insert().values(id=1, name="GID", gray_switch=True, orphan_policy="adopt",
                                                created_at=now, updated_at=now))
            conn.execute(rules.insert().values(group_id=1, selector={"version": "v2"}, gray=True, position=1,
                                               created_at=now))
            conn.execute(clients.insert().values(group_id=1, client_id="c1", role="consumer", labels={}, gray=False,
                                                 state="NORMAL", queues=[], topics=[], first_seen=now,
                                                 last_seen=now))
        upgrade(db)
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT name, orphan_policy, gray_weight FROM groups")).all() == [
                ("GID", "adopt", 0)]
            assert conn.execute(sa.text("SELECT count(*) FROM gray_rules")).scalar() == 1
            assert conn.execute(sa.text("SELECT count(*) FROM clients")).scalar() == 1
        with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
            conn.execute(sa.text("UPDATE groups SET gray_weight = 101"))
    finally:
        engine.dispose()
