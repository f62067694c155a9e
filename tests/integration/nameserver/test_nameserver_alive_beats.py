"""Alive beats of ``POST /v1/clients/heartbeats`` on SQLite and PostgreSQL: a client whose report did not change sends
its key alone, or the ``alive_id`` its full heartbeat's result gave; the name server refreshes the caller's live rows
in a constant number of statements and answers no report, 404 for a key (``alive_missing`` for an id) it cannot
refresh that way (unknown, expired, another principal's: nothing is created or bound), 403 beyond the rights."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from nameserver_testkit import OPS
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session
from test_nameserver_statements import recorded_statements

from graymq.nameserver.models import Client

pytestmark = [pytest.mark.integration,
              pytest.mark.name_server(headers=None, client_expiry_seconds=600, health_sample_seconds=60)]


def principal(api: TestClient, name: str, *groups: str) -> dict[str, str]:
    added = api.post("/v1/principals", json={"name": name, "consume": list(groups)}, headers=OPS)
    assert added.status_code == 201, added.text
    return {"Authorization": f"Bearer {added.json()['token']}"}


def beat(client_id: str, group: str = "GID_ORDERS", **fields: Any) -> dict[str, Any]:
    return {"group": group, "client_id": client_id, "role": "consumer", "labels": {"version": "v1"}, **fields}


def key(client_id: str, group: str = "GID_ORDERS", **fields: Any) -> dict[str, Any]:
    return {"group": group, "client_id": client_id, "role": "consumer", **fields}


def post(api: TestClient, headers: dict[str, str], heartbeats: list[dict[str, Any]] | None = None,
         alive: list[dict[str, Any]] | None = None, alive_ids: list[int] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"heartbeats": heartbeats or []}
    if alive is not None:
        body["alive"] = alive
    if alive_ids is not None:
        body["alive_ids"] = alive_ids
    response = api.post("/v1/clients/heartbeats", json=body, headers=headers)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def rows(api: TestClient) -> dict[str, Client]:
    engine: Engine = api.app.state.engine  # type: ignore[attr-defined]
    with Session(engine) as session:
        return {f"{row.client_id}/{row.principal}": row for row in session.scalars(select(Client))}


def last_seen(api: TestClient) -> dict[str, datetime]:
    return {name.split("/")[0]: row.last_seen for name, row in rows(api).items()}


def test_alive_refreshes_the_callers_live_rows_in_statements_independent_of_their_number(ns: TestClient) -> None:
    orders = principal(ns, "orders", "GID_ORDERS", "GID_PAYMENTS")
    post(ns, orders, [beat(f"c-{i:03d}", ("GID_ORDERS", "GID_PAYMENTS")[i % 2]) for i in range(100)])
    before = last_seen(ns)
    engine: Engine = ns.app.state.engine  # type: ignore[attr-defined]

    with recorded_statements(engine) as hundred:
        answer = post(ns, orders, alive=[key(f"c-{i:03d}", ("GID_ORDERS", "GID_PAYMENTS")[i % 2]) for i in range(100)])
    with recorded_statements(engine) as ten:
        post(ns, orders, alive=[key(f"c-{i:03d}", ("GID_ORDERS", "GID_PAYMENTS")[i % 2]) for i in range(10)])

    assert answer["results"] == [] and answer["alive"] == [{"status_code": 200}] * 100
    after = last_seen(ns)
    assert all(after[f"c-{i:03d}"] > before[f"c-{i:03d}"] for i in range(100))
    assert len(hundred) == len(ten), (hundred, ten)
    assert len(hundred) <= 6, hundred
    assert not any("INSERT" in statement for statement in hundred), hundred


def test_alive_is_refused_with_404_for_unknown_expired_and_other_principals_clients_creating_and_binding_nothing(
        ns: TestClient) -> None:
    orders = principal(ns, "orders", "GID_ORDERS", "GID_NEW")
    other = principal(ns, "other", "GID_ORDERS")
    post(ns, other, [beat("theirs")])
    post(ns, orders, [beat("mine"), beat("gone")])
    assert ns.delete("/v1/groups/GID_ORDERS/clients/gone", params={"role": "consumer"}, headers=orders).status_code \
        == 204
    before = rows(ns)

    answer = post(ns, orders, alive=[key("mine"), key("unknown"), key("theirs"), key("gone"),
                                     key("mine", "GID_NEW")])

    assert [r["status_code"] for r in answer["alive"]] == [200, 404, 404, 404, 404]
    assert "send its full heartbeat" in answer["alive"][1]["error"] and "detail" in answer["alive"][1]
    assert set(rows(ns)) == set(before) == {"theirs/other", "mine/orders", "gone/orders"}
    assert rows(ns)["theirs/other"].last_seen == before["theirs/other"].last_seen
    assert rows(ns)["gone/orders"].last_seen == before["gone/orders"].last_seen
    assert ns.get("/v1/groups/GID_NEW/clients", headers=OPS).status_code == 404


def test_alive_beyond_the_rights_is_refused_with_403_and_the_others_are_refreshed(ns: TestClient) -> None:
    orders = principal(ns, "orders", "GID_ORDERS")
    post(ns, orders, [beat("mine")])

    answer = post(ns, orders, alive=[key("mine", "GID_PAYMENTS"), key("mine")])

    assert [r["status_code"] for r in answer["alive"]] == [403, 200]
    assert answer["alive"][0]["error"] == "FORBIDDEN"


def test_a_mixed_batch_answers_full_heartbeats_and_refreshes_alive_ones_storing_their_health(ns: TestClient) -> None:
    orders = principal(ns, "orders", "GID_ORDERS")
    post(ns, orders, [beat("steady"), beat("busy")])
    health = {"gray": {"consumed": 0}, "normal": {"consumed": 42, "failed": 1, "p99_ms": 3.5}}

    answer = post(ns, orders, [beat("steady", labels={"version": "v2"}), beat("new")],
                  alive=[key("busy", health=health), key("nobody")])

    assert [r["answer"]["client_id"] for r in answer["results"]] == ["steady", "new"]
    assert [r["status_code"] for r in answer["alive"]] == [200, 404]
    listed = {c["client_id"]: c for c in ns.get("/v1/groups/GID_ORDERS/clients", headers=OPS).json()["clients"]}
    assert listed["steady"]["labels"] == {"version": "v2"}
    assert listed["busy"]["health"]["normal"]["consumed"] == 42
    assert listed["busy"]["labels"] == {"version": "v1"}


def test_alive_ids_refresh_the_callers_live_rows_in_one_statement_and_list_those_they_cannot(ns: TestClient) -> None:
    orders = principal(ns, "orders", "GID_ORDERS", "GID_PAYMENTS")
    other = principal(ns, "other", "GID_ORDERS")
    [theirs] = post(ns, other, [beat("theirs")])["results"]
    stored = post(ns, orders, [beat(f"c-{i:03d}", ("GID_ORDERS", "GID_PAYMENTS")[i % 2]) for i in range(100)]
                  + [beat("gone")])["results"]
    ids = {r["answer"]["client_id"]: r["alive_id"] for r in stored}
    assert len(set(ids.values())) == 101 and all(isinstance(i, int) for i in ids.values())
    assert ns.delete("/v1/groups/GID_ORDERS/clients/gone", params={"role": "consumer"}, headers=orders).status_code \
        == 204
    before = last_seen(ns)
    engine: Engine = ns.app.state.engine  # type: ignore[attr-defined]
    mine = [ids[f"c-{i:03d}"] for i in range(100)]

    with recorded_statements(engine) as hundred:
        answer = post(ns, orders, alive_ids=[*mine, theirs["alive_id"], ids["gone"], 2**31 - 1])
    with recorded_statements(engine) as ten:
        post(ns, orders, alive_ids=mine[:10])

    assert answer == {"results": [], "alive_missing": [theirs["alive_id"], ids["gone"], 2**31 - 1]}
    after = last_seen(ns)
    assert all(after[f"c-{i:03d}"] > before[f"c-{i:03d}"] for i in range(100))
    assert after["theirs"] == before["theirs"] and after["gone"] == before["gone"]  # unregistered: expired
    assert len(hundred) == len(ten) <= 4, hundred
    assert not any("INSERT" in statement for statement in hundred), hundred


def test_an_alive_id_of_a_client_silent_for_half_its_expiry_is_missing_and_its_full_heartbeat_revives_it(
        ns: TestClient) -> None:
    orders = principal(ns, "orders", "GID_ORDERS")
    [first] = post(ns, orders, [beat("late")])["results"]
    engine: Engine = ns.app.state.engine  # type: ignore[attr-defined]
    with Session(engine) as session:
        row = session.get(Client, first["alive_id"])
        assert row is not None
        row.last_seen = datetime.fromtimestamp(0).astimezone()
        session.commit()

    assert post(ns, orders, alive_ids=[first["alive_id"]])["alive_missing"] == [first["alive_id"]]
    [again] = post(ns, orders, [beat("late")])["results"]
    assert again["alive_id"] == first["alive_id"]
    assert post(ns, orders, alive_ids=[again["alive_id"]])["alive_missing"] == []


def test_a_batch_holds_a_heartbeat_or_an_alive_client(ns: TestClient) -> None:
    orders = principal(ns, "orders", "GID_ORDERS")
    assert ns.post("/v1/clients/heartbeats", json={"heartbeats": [], "alive": []}, headers=orders).status_code == 422
    assert ns.post("/v1/clients/heartbeats", json={"alive": [{**key("x"), "labels": {}}]},
                   headers=orders).status_code == 422
    assert ns.post("/v1/clients/heartbeats", json={"alive_ids": [0]}, headers=orders).status_code == 422
    assert ns.post("/v1/clients/heartbeats", json={"alive_ids": ["x"]}, headers=orders).status_code == 422
    plain = ns.post("/v1/clients/heartbeats", json={"heartbeats": [beat("x")]}, headers=orders).json()
    assert set(plain) == {"results"}  # the answer of a batch without alive clients is as it was
