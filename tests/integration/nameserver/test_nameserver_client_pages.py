"""``GET /v1/groups/{group}/clients`` at a fleet's size: a page (``limit``, ``offset``) reads its own rows only, while
``total`` and the counts per role and side cover every live client; without ``limit`` every client is listed as
before. On SQLite and PostgreSQL, with thousands of client rows written straight into the table."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from nameserver_testkit import client_heartbeat
from sqlalchemy import Engine, event, insert, select
from sqlalchemy.orm import Session

from graymq.nameserver.clock import utc_now
from graymq.nameserver.models import Client, Group
from graymq.nameserver.schemas import CLIENTS_PAGE_MAX

pytestmark = [pytest.mark.integration, pytest.mark.name_server(health_sample_seconds=60, client_stale_seconds=30)]
GROUP = "G_FLEET"
CONSUMERS, GRAY, LANE_V2, PRODUCERS, STALE, EXPIRED = 3000, 300, 100, 500, 40, 200


def fleet(api: TestClient) -> None:
    """Consumers (``GRAY`` of them gray, ``LANE_V2`` in lane v2, ``STALE`` silent for 40 s: stale, not expired),
    producers, and ``EXPIRED`` rows past the expiry, inserted in one statement."""
    client_heartbeat(api, GROUP, "a-first")  # the group, through the API
    engine: Engine = api.app.state.engine  # type: ignore[attr-defined]
    now = utc_now()
    with Session(engine) as session:
        group_id = session.scalars(select(Group.id).where(Group.name == GROUP)).one()

        def row(i: int, role: str, gray: bool, lane: str | None, ago_s: float) -> dict[str, Any]:
            return {"group_id": group_id, "client_id": f"{role[0]}-{i:05d}", "role": role, "labels": {}, "gray": gray,
                    "lane": lane, "state": "GRAY" if gray else "NORMAL", "queues": [], "topics": ["T"],
                    "first_seen": now, "last_seen": now - timedelta(seconds=ago_s)}

        rows = [row(i, "consumer", i < GRAY + LANE_V2, "v2" if GRAY <= i < GRAY + LANE_V2 else None,
                    40 if i >= CONSUMERS - STALE else 0) for i in range(CONSUMERS)]
        rows += [row(i, "producer", False, None, 0) for i in range(PRODUCERS)]
        rows += [row(CONSUMERS + i, "consumer", True, None, 3600) for i in range(EXPIRED)]
        session.execute(insert(Client), rows)
        session.commit()


class Loaded:
    """Client rows the ORM builds, and statements run, while counting."""

    def __init__(self, engine: Engine) -> None:
        self.rows = 0
        self.statements = 0
        self.engine = engine

    def __enter__(self) -> Loaded:
        event.listen(Client, "load", self._row)
        event.listen(self.engine, "before_cursor_execute", self._statement)
        return self

    def __exit__(self, *_: object) -> None:
        event.remove(Client, "load", self._row)
        event.remove(self.engine, "before_cursor_execute", self._statement)

    def _row(self, *_: object) -> None:
        self.rows += 1

    def _statement(self, *_: object) -> None:
        self.statements += 1


def test_a_page_reads_its_rows_only_and_the_counts_cover_every_live_client(ns: TestClient) -> None:
    fleet(ns)
    total = CONSUMERS + PRODUCERS + 1
    with Loaded(ns.app.state.engine) as first:  # type: ignore[attr-defined]
        page = ns.get(f"/v1/groups/{GROUP}/clients", params={"limit": 50}).json()
    assert [c["client_id"] for c in page["clients"]] == ["a-first"] + [f"c-{i:05d}" for i in range(49)]
    assert (page["total"], page["offset"], page["next_offset"]) == (total, 0, 50)
    assert page["counts"] == [
        {"role": "consumer", "lane": None, "clients": CONSUMERS - GRAY - LANE_V2 + 1, "stale": STALE},
        {"role": "consumer", "lane": "gray", "clients": GRAY, "stale": 0},
        {"role": "consumer", "lane": "v2", "clients": LANE_V2, "stale": 0},
        {"role": "producer", "lane": None, "clients": PRODUCERS, "stale": 0},
    ]
    assert first.rows == 50 and first.statements <= 5, (first.rows, first.statements)
    with Loaded(ns.app.state.engine) as every:  # type: ignore[attr-defined]
        listed = ns.get(f"/v1/groups/{GROUP}/clients").json()
    assert every.rows == total and len(listed["clients"]) == total  # the check above can fail: all rows cost this
    assert (listed["total"], listed["next_offset"]) == (total, None)
    assert listed["counts"] == page["counts"]


def test_pages_walk_every_live_client_once_and_the_last_has_no_next(ns: TestClient) -> None:
    fleet(ns)
    seen: list[tuple[str, str]] = []
    offset: int | None = 0
    while offset is not None:
        page = ns.get(f"/v1/groups/{GROUP}/clients", params={"limit": CLIENTS_PAGE_MAX, "offset": offset}).json()
        seen += [(c["client_id"], c["role"]) for c in page["clients"]]
        offset = page["next_offset"]
    every = [(c["client_id"], c["role"]) for c in ns.get(f"/v1/groups/{GROUP}/clients").json()["clients"]]
    assert seen == every and len(seen) == CONSUMERS + PRODUCERS + 1
    consumers = {"role": "consumer", "limit": 10}
    edge = ns.get(f"/v1/groups/{GROUP}/clients", params={**consumers, "offset": CONSUMERS - STALE}).json()
    assert [c["stale"] for c in edge["clients"]] == [False] + [True] * 9  # a-first shifts the consumers by one
    assert (edge["next_offset"], edge["total"]) == (CONSUMERS - STALE + 10, CONSUMERS + 1)
    assert [c["role"] for c in edge["counts"]] == ["consumer"] * 3
    last = ns.get(f"/v1/groups/{GROUP}/clients", params={**consumers, "offset": CONSUMERS - 9}).json()
    assert [c["client_id"] for c in last["clients"]] == [f"c-{i:05d}" for i in range(CONSUMERS - 10, CONSUMERS)]
    assert last["next_offset"] is None


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": CLIENTS_PAGE_MAX + 1}, {"limit": 5, "offset": -1}])
def test_a_page_out_of_bounds_is_refused(ns: TestClient, params: dict[str, int]) -> None:
    client_heartbeat(ns, GROUP, "c1")
    response = ns.get(f"/v1/groups/{GROUP}/clients", params=params)
    assert response.status_code == 422, response.text
