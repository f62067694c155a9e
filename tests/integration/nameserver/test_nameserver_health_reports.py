"""The console's health sampler reads every live consumer's report from SQLite and PostgreSQL each sample, and
decodes only the reports whose text changed since its last reading (at 5,000 clients, decoding all of them every
5 s was most of the sampler's cost); a damaged report is left out with one warning."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text, update
from test_nameserver_alive_beats import beat, key, post, principal

from graymq.nameserver.models import Client
from graymq.nameserver.services import health_history
from graymq.nameserver.services.health_history import LiveReports

pytestmark = [pytest.mark.integration, pytest.mark.name_server(headers=None, client_expiry_seconds=600,
                                                                 health_sample_seconds=60)]


def test_live_reports_decode_only_the_reports_that_changed(ns: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    orders = principal(ns, "orders", "GID_ORDERS")
    post(ns, orders, [beat("c1", health={"gray": {"consumed": 5}}), beat("c2", health={"normal": {"consumed": 7}}),
                      beat("quiet"), beat("v3", lane="v3", gray=True, health={"gray": {"consumed": 1}})])
    decoded: list[str] = []

    def loads(text: str) -> Any:
        decoded.append(text)
        return json.loads(text)

    monkeypatch.setattr(health_history, "json", SimpleNamespace(loads=loads))
    read = LiveReports(expiry_s=600)

    def reports() -> dict[str, Any]:
        with ns.app.state.read_sessions() as session:  # type: ignore[attr-defined]
            return read(session)["GID_ORDERS"]

    first = reports()
    assert {cid: (r["lane"], r["gray"]["consumed"], r["normal"]["consumed"]) for cid, r in first.items()} == {
        "c1": (None, 5, 0), "c2": (None, 0, 7), "v3": ("v3", 1, 0)}  # "quiet" reports an empty one
    assert len(decoded) == 4
    assert reports() == first and len(decoded) == 4  # nothing changed: nothing decoded

    post(ns, orders, alive=[key("c1", health={"gray": {"consumed": 9}})])
    again = reports()
    assert again["c1"]["gray"]["consumed"] == 9 and again["c2"] == first["c2"] and len(decoded) == 5


def test_a_damaged_report_is_left_out_with_a_warning_once_and_the_others_still_read(
        ns: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    orders = principal(ns, "orders", "GID_ORDERS")
    post(ns, orders, [beat("ok", health={"gray": {"consumed": 5}}), beat("listed", health={"gray": {"consumed": 1}}),
                      beat("damaged", health={"gray": {"consumed": 2}})])
    sqlite = ns.app.state.engine.dialect.name == "sqlite"  # type: ignore[attr-defined]
    with ns.app.state.engine.begin() as conn:  # type: ignore[attr-defined]
        conn.execute(update(Client).where(Client.client_id == "listed").values(health=[1, 2]))
        if sqlite:  # PostgreSQL's jsonb holds no text that is not JSON
            conn.execute(text("UPDATE clients SET health = '{\"gray\": {' WHERE client_id = 'damaged'"))
    read = LiveReports(expiry_s=600)

    def reports() -> dict[str, Any]:
        with ns.app.state.read_sessions() as session:  # type: ignore[attr-defined]
            return read(session)["GID_ORDERS"]

    with caplog.at_level(logging.WARNING, logger=health_history.__name__):
        first, again = reports(), reports()
    assert set(first) == ({"ok"} if sqlite else {"ok", "damaged"}) and again == first
    warned = [r.getMessage() for r in caplog.records if "not a JSON object" in r.getMessage()]
    assert len(warned) == (2 if sqlite else 1) and any("client listed" in w for w in warned)  # once per report
