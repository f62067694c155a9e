"""The group lookup every rebalance makes costs a constant number of SQL statements, whatever its size."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient
from nameserver_testkit import OPS, client_heartbeat, serve
from sqlalchemy import Engine, event

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def api(db_url: str) -> Iterator[TestClient]:
    """The name server app with the console's health sampler at its slowest: it reads at start, then every 60 s,
    not every 5 s, when its statement could land among those a lookup is counted by (it did on a loaded machine)."""
    with serve(db_url, health_sample_seconds=60) as client:
        yield client


@contextmanager
def recorded_statements(engine: Engine) -> Iterator[list[str]]:
    statements: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", record)


def populate(api: TestClient, group: str, clients: int) -> None:
    api.post(f"/v1/groups/{group}/rules", json={"selector": {"version": "v2"}, "gray": True}, headers=OPS)
    api.post(f"/v1/groups/{group}/rules", json={"selector": {"zone": "b"}, "gray": False}, headers=OPS)
    for i in range(clients):
        labels = {"version": "v2" if i % 4 == 0 else "v1", "zone": "ab"[i % 2]}
        client_heartbeat(api, group, f"client-{i:03d}", labels=labels, queues=[f"T@b:{i % 8}"])
        if i % 10 == 0:
            client_heartbeat(api, group, f"client-{i:03d}", role="producer", labels=labels)


def test_group_lookup_statement_count_does_not_grow_with_the_number_of_clients(api: TestClient) -> None:
    populate(api, "small_group", 2)
    populate(api, "big_group", 200)
    engine: Engine = api.app.state.engine  # type: ignore[attr-defined]

    with recorded_statements(engine) as small:
        small_clients = api.get("/v1/groups/small_group/clients").json()["clients"]
    with recorded_statements(engine) as big:
        big_clients = api.get("/v1/groups/big_group/clients").json()["clients"]
    with recorded_statements(engine) as big_consumers:
        consumers = api.get("/v1/groups/big_group/clients", params={"role": "consumer"}).json()["clients"]

    assert len(small_clients) == 3 and len(big_clients) == 220 and len(consumers) == 200
    assert sum(c["desired_gray"] for c in consumers) == 50  # version=v2 matches the first rule
    assert len(big) == len(small) == len(big_consumers), (small, big)
    assert len(big) <= 4, big  # the group, its rules, its clients, their counts per role and side
