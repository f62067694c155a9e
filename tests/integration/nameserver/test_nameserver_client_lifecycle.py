"""A client's registration ends when it says so (unregister) or is presumed gone (stale), on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient
from nameserver_testkit import OPS, client_heartbeat, make_settings, wait_until

# Clients expire late (10 minutes) and go stale after three seconds (one second was within reach of a loaded
# machine's gap between a heartbeat and the listing after it).
pytestmark = [pytest.mark.integration,
              pytest.mark.name_server(client_expiry_seconds=600, client_stale_seconds=3.0)]


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def listed(api: TestClient, group: str, **params: str) -> dict[str, dict[str, Any]]:
    clients = api.get(f"/v1/groups/{group}/clients", params=params).json()["clients"]
    return {f"{c['client_id']}/{c['role']}": c for c in clients}


def unregister(api: TestClient, group: str, client_id: str, role: str | None = "consumer") -> int:
    params = {"role": role} if role else None
    return api.delete(f"/v1/groups/{group}/clients/{client_id}", params=params).status_code


def test_an_unregistered_client_leaves_its_group_at_once_and_is_audited_once(ns: TestClient) -> None:
    group = unique("g")
    client_heartbeat(ns, group, "c1", gray=True, state="GRAY", queues=["b:T:0"])
    client_heartbeat(ns, group, "c2")
    assert unregister(ns, group, "c1") == 204
    assert set(listed(ns, group)) == {"c2/consumer"}
    assert unregister(ns, group, "c1") == 204  # idempotent
    entries = ns.get("/v1/audit", params={"group": group, "object_type": "client"}).json()
    assert [(e["actor"], e["object_id"], e["action"]) for e in entries] == [("c1", "c1", "unregister")]
    assert entries[0]["before"] == {"consumer": {"gray": True, "state": "GRAY", "queues": ["b:T:0"]}}


def test_unregistering_an_unknown_client_or_group_changes_nothing(ns: TestClient) -> None:
    group = unique("g")
    client_heartbeat(ns, group, "c1")
    assert unregister(ns, group, "nobody") == 204
    assert unregister(ns, unique("no_group"), "c1") == 204
    assert set(listed(ns, group)) == {"c1/consumer"}
    assert ns.get("/v1/audit", params={"group": group, "object_type": "client"}).json() == []
    bad = ns.delete(f"/v1/groups/{group}/clients/c1", params={"role": "broker"})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", "role"]


def test_unregistering_one_role_keeps_the_others_and_no_role_means_all(ns: TestClient) -> None:
    group = unique("g")
    for role in ("consumer", "producer"):
        client_heartbeat(ns, group, "app", role=role)
    assert unregister(ns, group, "app", "producer") == 204
    assert set(listed(ns, group)) == {"app/consumer"}
    client_heartbeat(ns, group, "app", role="producer")
    assert unregister(ns, group, "app", None) == 204
    assert listed(ns, group) == {}


def test_a_client_back_under_the_same_id_is_live_again_with_the_flag_operators_gave_it(ns: TestClient) -> None:
    group = unique("g")
    client_heartbeat(ns, group, "pod-0", declared_gray=True)
    assert ns.put(f"/v1/groups/{group}/clients/pod-0/flag", json={"gray": False}, headers=OPS).is_success
    assert unregister(ns, group, "pod-0") == 204
    answer = client_heartbeat(ns, group, "pod-0", declared_gray=True)
    assert (answer["explicit_gray"], answer["desired_gray"]) == (False, False)
    assert set(listed(ns, group)) == {"pod-0/consumer"}


def test_a_silent_client_is_listed_stale_until_it_heartbeats_again(ns: TestClient) -> None:
    group = unique("g")
    client_heartbeat(ns, group, "quiet", gray=True, state="GRAY")
    assert listed(ns, group)["quiet/consumer"]["stale"] is False
    wait_until(lambda: listed(ns, group)["quiet/consumer"]["stale"], 20, "the silent client going stale")
    client_heartbeat(ns, group, "quiet", gray=True, state="GRAY")
    assert listed(ns, group)["quiet/consumer"]["stale"] is False


def test_the_stale_window_defaults_to_three_push_consumer_heartbeats() -> None:
    settings = make_settings("sqlite:///unused.db")
    assert settings.client_stale_seconds == 15.0
    with pytest.raises(ValueError, match="client_stale_seconds"):
        make_settings("sqlite:///unused.db", client_stale_seconds=0)
