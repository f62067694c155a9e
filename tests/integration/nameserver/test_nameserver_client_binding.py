"""A client belongs to the principal that registered it, on SQLite and PostgreSQL: another principal may neither
heartbeat, watch nor unregister it while it is live; admins may; an expired, unregistered or unbound client is
claimed by the next heartbeat; dev mode binds nothing."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from nameserver_testkit import OPS, serve, wait_until
from sqlalchemy import Engine, insert, select

from graymq.migrations.schema import upgrade
from graymq.nameserver.db import create_db_engine
from graymq.nameserver.models import Client, Group

# Clients expire late (10 minutes); requests carry the token each test gives them.
pytestmark = [pytest.mark.integration, pytest.mark.name_server(headers=None, client_expiry_seconds=600)]

Headers = dict[str, str]


def principal(api: TestClient, name: str, group: str) -> Headers:
    """A principal allowed to consume ``group`` (added by the admin ``ops``): its bearer header."""
    added = api.post("/v1/principals", json={"name": name, "consume": [group]}, headers=OPS)
    assert added.status_code == 201, added.text
    return {"Authorization": f"Bearer {added.json()['token']}"}


def heartbeat(api: TestClient, headers: Headers, group: str, client_id: str, **fields: Any) -> Any:
    body = {"group": group, "client_id": client_id, "role": "consumer", **fields}
    return api.post("/v1/clients/heartbeat", json=body, headers=headers)


def watch(api: TestClient, headers: Headers, group: str, client_id: str) -> Any:
    body = {"group": group, "client_id": client_id, "role": "consumer", "timeout_s": 1}
    return api.post("/v1/clients/watch", json=body, headers=headers)


def unregister(api: TestClient, headers: Headers, group: str, client_id: str, role: str | None = None) -> Any:
    return api.delete(f"/v1/groups/{group}/clients/{client_id}", params={"role": role} if role else None,
                      headers=headers)


def listed(api: TestClient, group: str) -> dict[str, tuple[bool, str]]:
    clients = api.get(f"/v1/groups/{group}/clients", headers=OPS).json()["clients"]
    return {c["client_id"]: (c["gray"], c["state"]) for c in clients}


def principals_of(api: TestClient, group: str) -> dict[str, str | None]:
    """client id -> the principal its consumer row is bound to, read from the database."""
    engine: Engine = api.app.state.engine  # type: ignore[attr-defined]
    with engine.connect() as conn:
        rows = conn.execute(select(Client.client_id, Client.principal).join(Group, Group.id == Client.group_id)
                            .where(Group.name == group, Client.role == "consumer"))
        return {client_id: owner for client_id, owner in rows}


def forbidden(response: Any) -> str:
    assert response.status_code == 403, response.text
    body = response.json()
    return f"{body['error']}: {body['detail']}"


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def taken(by: str, client_id: str, group: str, owner: str) -> str:
    return (f"FORBIDDEN: principal {by} may not act as client {client_id} (consumer) of group {group}: "
            f"it belongs to principal {owner}")


def test_another_principal_can_neither_heartbeat_watch_nor_unregister_a_live_client(ns: TestClient) -> None:
    group = unique("g")
    owner, intruder = "owner_" + group, "other_" + group
    a, b = principal(ns, owner, group), principal(ns, intruder, group)
    assert heartbeat(ns, a, group, "c1", gray=True, state="GRAY").status_code == 200

    spoof = heartbeat(ns, b, group, "c1", gray=False, state="NORMAL")
    assert forbidden(spoof) == taken(intruder, "c1", group, owner)
    assert forbidden(watch(ns, b, group, "c1")) == taken(intruder, "c1", group, owner)
    assert forbidden(unregister(ns, b, group, "c1")) == taken(intruder, "c1", group, owner)
    assert forbidden(unregister(ns, b, group, "c1", "consumer")) == taken(intruder, "c1", group, owner)
    assert listed(ns, group) == {"c1": (True, "GRAY")}  # the owner's report stands
    assert principals_of(ns, group) == {"c1": owner}

    assert heartbeat(ns, b, group, "c2").status_code == 200  # its own client is fine
    assert heartbeat(ns, a, group, "c1", gray=True, state="DRAINING").status_code == 200
    assert watch(ns, a, group, "c1").status_code == 200
    assert listed(ns, group) == {"c1": (True, "DRAINING"), "c2": (False, "NORMAL")}
    assert unregister(ns, a, group, "c1").status_code == 204
    assert listed(ns, group) == {"c2": (False, "NORMAL")}


def test_an_admin_acts_on_any_client_without_taking_it_over(ns: TestClient) -> None:
    group = unique("g")
    a, b = principal(ns, "owner_" + group, group), principal(ns, "other_" + group, group)
    assert heartbeat(ns, a, group, "c1", gray=True, state="GRAY").status_code == 200
    assert heartbeat(ns, OPS, group, "c1", gray=True, state="DRAINING").status_code == 200
    assert watch(ns, OPS, group, "c1").status_code == 200
    assert principals_of(ns, group) == {"c1": "owner_" + group}
    assert forbidden(heartbeat(ns, b, group, "c1")) == taken("other_" + group, "c1", group, "owner_" + group)
    assert heartbeat(ns, a, group, "c1", gray=True, state="GRAY").status_code == 200
    assert unregister(ns, OPS, group, "c1").status_code == 204  # operators clear stale clients
    assert listed(ns, group) == {}


def test_an_unregistered_client_id_is_claimed_by_the_next_principal(ns: TestClient) -> None:
    group = unique("g")
    a, b = principal(ns, "first_" + group, group), principal(ns, "second_" + group, group)
    assert heartbeat(ns, a, group, "c1").status_code == 200
    assert unregister(ns, a, group, "c1").status_code == 204
    assert heartbeat(ns, b, group, "c1", gray=True, state="GRAY").status_code == 200
    assert forbidden(heartbeat(ns, a, group, "c1")) == taken("first_" + group, "c1", group, "second_" + group)
    assert listed(ns, group) == {"c1": (True, "GRAY")}


def test_an_expired_client_is_claimed_by_the_next_principal(migrated_db: str) -> None:
    group = unique("g")
    with serve(migrated_db, headers=None, client_expiry_seconds=1) as ns:
        a, b = principal(ns, "first_" + group, group), principal(ns, "second_" + group, group)
        assert heartbeat(ns, a, group, "c1").status_code == 200
        wait_until(lambda: heartbeat(ns, b, group, "c1", gray=True).status_code == 200, what="c1 claimed by b")
        assert principals_of(ns, group) == {"c1": "second_" + group}


def test_clients_stored_before_binding_are_claimed_by_the_next_heartbeat(db: str) -> None:
    upgrade(db, "0004")
    engine = create_db_engine(db)
    now = datetime.now(UTC)
    try:
        with engine.begin() as conn:
            conn.execute(insert(Group.__table__).values(id=1, name="legacy", gray_switch=True, orphan_policy="hold",
                                                        created_at=now, updated_at=now))
            conn.execute(insert(Client.__table__).values(group_id=1, client_id="c1", role="consumer", labels={},
                                                         gray=True, state="GRAY", queues=[], topics=[], first_seen=now,
                                                         last_seen=now))
        upgrade(db)
        with engine.connect() as conn:
            assert conn.execute(select(Client.principal)).scalars().all() == [None]
    finally:
        engine.dispose()
    with serve(db, headers=None, client_expiry_seconds=600) as ns:
        a, b = principal(ns, "app_a", "legacy"), principal(ns, "app_b", "legacy")
        assert watch(ns, b, "legacy", "c1").status_code == 200  # unbound: anyone of the group may watch
        assert heartbeat(ns, a, "legacy", "c1", gray=True, state="GRAY").status_code == 200
        assert forbidden(heartbeat(ns, b, "legacy", "c1")) == taken("app_b", "c1", "legacy", "app_a")
        assert principals_of(ns, "legacy") == {"c1": "app_a"}


def test_dev_mode_binds_no_client(migrated_db: str) -> None:
    group = unique("g")
    with serve(migrated_db, headers=None, dev_mode=True, client_expiry_seconds=600) as ns:
        a, b = principal(ns, "dev_a_" + group, group), principal(ns, "dev_b_" + group, group)
        assert heartbeat(ns, a, group, "c1", gray=True, state="GRAY").status_code == 200
        assert heartbeat(ns, b, group, "c1", gray=False, state="NORMAL").status_code == 200
        assert heartbeat(ns, {}, group, "c1").status_code == 200  # no token: acts as dev
        assert watch(ns, b, group, "c1").status_code == 200
        assert unregister(ns, b, group, "c1").status_code == 204
        assert principals_of(ns, group) == {"c1": None}
