"""Helpers shared by the name server tests (tokens, heartbeats, polling)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx
from fastapi.testclient import TestClient
from sqlalchemy import text

from graymq.nameserver.app import create_app
from graymq.nameserver.settings import NameServerSettings
from graymq.nameserver.watch import CHANNEL, GroupChanges

OPS_TOKEN = "ops-secret-1"
CI_TOKEN = "ci-secret-2"
ADMIN_TOKENS = f"ops={OPS_TOKEN},ci={CI_TOKEN}"
OPS = {"Authorization": f"Bearer {OPS_TOKEN}"}
CI = {"Authorization": f"Bearer {CI_TOKEN}"}


def make_settings(db_url: str, **overrides: Any) -> NameServerSettings:
    """In-process name server settings with authentication on (``dev_mode`` as an override)."""
    values: dict[str, Any] = {"db_url": db_url, "admin_tokens": ADMIN_TOKENS, "auth_failure_limit": 10_000,
                              "dev_mode": False, **overrides}
    return NameServerSettings(**values)


def serve(db_url: str, headers: dict[str, str] | None = OPS, **settings: Any) -> TestClient:
    """The in-process name server on the migrated ``db_url`` with ``settings`` (see ``make_settings``); its requests
    carry ``headers`` unless they give their own (the admin ``ops`` by default, nothing with ``None``). Enter it as
    a context manager to start the app and leave it to stop the app."""
    return TestClient(create_app(make_settings(db_url, **settings)), headers=headers)


def client_heartbeat(
    http: TestClient | httpx.Client, group: str, client_id: str, **fields: Any
) -> dict[str, Any]:
    body = {"group": group, "client_id": client_id, "role": "consumer", **fields}
    response = http.post("/v1/clients/heartbeat", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def broker_heartbeat(
    http: TestClient | httpx.Client, name: str, *topics: tuple[str, int, int]
) -> dict[str, Any]:
    body = {
        "broker_name": name,
        "address": f"10.0.0.{len(name)}:10911",
        "topics": [{"topic": t, "queue_nums": n, "gray_queue_nums": g} for t, n, g in topics],
    }
    response = http.post("/v1/brokers/heartbeat", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def wait_until(condition: Callable[[], bool], timeout: float = 15.0, what: str = "condition") -> None:
    """Poll ``condition`` until it holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not hold within {timeout}s")
        time.sleep(0.05)


def settle_notifications(http: TestClient) -> None:
    """Wait until the in-process name server ``http`` has heard the notifications of every change committed so far
    (PostgreSQL delivers them in commit order: a marker sent now arrives after them), so none arriving late wakes or
    drops what a test watches next; at once on SQLite (it notifies nothing)."""
    engine = http.app.state.engine  # type: ignore[attr-defined]
    if engine.dialect.name != "postgresql":
        return
    changes: GroupChanges = http.app.state.group_changes  # type: ignore[attr-defined]
    marker = f"settled_{uuid.uuid4().hex[:8]}"
    heard = changes.changed(marker)
    with engine.begin() as conn:
        conn.execute(text("SELECT pg_notify(:channel, :marker)"), {"channel": CHANNEL, "marker": marker})
    wait_until(heard.is_set, what="the marker's notification")
