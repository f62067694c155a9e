"""The JSON the ops CLI prints from the name server's answers, pinned key for key (DESIGN §7.1: scripts read it,
so it is extended, never broken): ``topic create``, ``audit``, ``principal add|rotate|list`` and ``gray status``
print what the name server answered, with the same keys and values, whatever the client does with it in between."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from graymq.nameserver_api.client import NameServerClient
from tests.support.trust import ADMIN, StartProcess, bearer, cli, start_secure_nameserver

pytestmark = pytest.mark.integration
GROUP = "G_SHAPES"
TOPIC_KEYS = {"topic", "queue_nums", "gray_queue_nums", "perm", "created_at", "updated_at", "brokers_ready",
              "brokers_pending"}
STATUS_KEYS = {"group", "gray_switch", "orphan_policy", "clients", "gray_backlog", "gray_queues", "gray_backlog_known",
               "unavailable_brokers", "stale_clients", "gray_weight", "weighted_queues", "gray_retired", "health",
               "lag", "broker_sets", "lanes"}  # lanes: added with lanes (docs/lanes.md), every other key as before
CLIENT_KEYS = {"client_id", "role", "labels", "explicit_gray", "desired_gray", "gray", "state", "queues", "topics",
               "last_seen", "health", "gray_marks", "principal", "stale"}
HEALTH = {"gray": {"consumed": 40, "failed": 2, "sent_back": 1, "dead_lettered": 0, "p50_ms": 1.5, "p99_ms": 9.25},
          "normal": {"consumed": 300, "failed": 0, "sent_back": 0, "dead_lettered": 0, "p50_ms": 0.5, "p99_ms": 2.0}}


@pytest.fixture
def ns_url(graymq_process: StartProcess, tmp_path: Path) -> str:
    return start_secure_nameserver(graymq_process, f"sqlite:///{tmp_path}/ns.db")


def printed(ns_url: str, *args: str) -> Any:
    result = cli(ns_url, *args)
    assert result.returncode == 0, f"graymq {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
    return json.loads(result.stdout)


def rest(ns_url: str, method: str, path: str, **kwargs: Any) -> Any:
    response = httpx.request(method, ns_url + path, headers=bearer(ADMIN), timeout=10, **kwargs)
    response.raise_for_status()
    return response.json()


def test_topic_create_json_is_the_name_servers_answer(ns_url: str) -> None:
    created = printed(ns_url, "topic", "create", "T_SHAPES", "--queues", "4", "--gray-queues", "2", "--json")
    assert set(created) == TOPIC_KEYS
    assert (created["brokers_ready"], created["brokers_pending"]) == ([], [])  # no broker registered
    [listed] = [t for t in rest(ns_url, "GET", "/v1/topics") if t["topic"] == "T_SHAPES"]
    assert {k: created[k] for k in listed} == listed  # the same values, timestamps written the same way


def test_audit_json_is_the_name_servers_audit_log_unchanged(ns_url: str) -> None:
    cli(ns_url, "topic", "create", "T_AUDITED", "--queues", "2", "--gray-queues", "0")
    cli(ns_url, "gray", "switch", GROUP, "on", "--reason", "shapes")
    cli(ns_url, "gray", "orphan", GROUP, "adopt", "--reason", "shapes")
    entries = printed(ns_url, "audit", "--limit", "5", "--json")
    assert entries == rest(ns_url, "GET", "/v1/audit", params={"limit": 5})
    assert {k for e in entries for k in e} == {"id", "actor", "at", "object_type", "object_id", "group", "action",
                                               "before", "after", "reason"}
    assert printed(ns_url, "audit", "--group", GROUP, "--json") == rest(ns_url, "GET", "/v1/audit",
                                                                         params={"group": GROUP, "limit": 20})


def test_principal_add_rotate_and_list_json_keep_their_keys(ns_url: str) -> None:
    plain = printed(ns_url, "principal", "add", "app-plain", "--produce", "ORDER_*", "--json")
    assert set(plain) == {"name", "token"} and plain["name"] == "app-plain"
    keyed = printed(ns_url, "principal", "add", "app-keyed", "--consume", "billing:ORDER_*", "--access-key", "--json")
    assert set(keyed) == {"name", "token", "access_key", "secret_key"}
    rotated = printed(ns_url, "principal", "rotate", "app-keyed", "--json")
    assert set(rotated) == {"name", "token", "access_key", "secret_key"}
    assert rotated["access_key"] == keyed["access_key"] and rotated["token"] != keyed["token"]
    assert set(printed(ns_url, "principal", "rotate", "app-plain", "--json")) == {"name", "token"}
    printed(ns_url, "principal", "add", "broker-x", "--broker", "--broker-name", "edge-*", "--json")
    listed = printed(ns_url, "principal", "list", "--json")
    assert listed == rest(ns_url, "GET", "/v1/principals")
    assert {p["name"] for p in listed} == {"app-plain", "app-keyed", "broker-x"}
    assert {k for p in listed for k in p} == {"name", "produce", "consume", "admin", "broker", "broker_names",
                                              "access_key", "created_at", "updated_at"}


def test_gray_status_json_keeps_its_keys_and_the_name_servers_client_values(ns_url: str) -> None:
    beats = [{"group": GROUP, "client_id": "v2", "role": "consumer", "labels": {"version": "v2"}, "gray": True,
              "state": "GRAY", "declared_gray": True, "health": HEALTH},
             {"group": GROUP, "client_id": "v1", "role": "consumer", "labels": {"version": "v1"}},
             {"group": GROUP, "client_id": "p2", "role": "producer", "gray": True, "state": "GRAY",
              "gray_marks": True}]
    for beat in beats:
        rest(ns_url, "POST", "/v1/clients/heartbeat", json=beat)
    cli(ns_url, "gray", "switch", GROUP, "on")
    status = printed(ns_url, "gray", "status", GROUP, "--json")
    assert set(status) == STATUS_KEYS
    raw = rest(ns_url, "GET", f"/v1/groups/{GROUP}/clients")
    assert {k: status[k] for k in ("group", "gray_switch", "orphan_policy", "gray_weight", "gray_retired")} == {
        k: raw[k] for k in ("group", "gray_switch", "orphan_policy", "gray_weight", "gray_retired")}
    assert [c["client_id"] for c in status["clients"]] == ["v1", "v2", "p2"]  # by role, then id
    by_id = {c["client_id"]: c for c in raw["clients"]}
    for shown in status["clients"]:
        assert set(shown) == CLIENT_KEYS
        assert {k: v for k, v in shown.items() if k != "stale"} == {k: by_id[shown["client_id"]].get(k)
                                                                     for k in CLIENT_KEYS - {"stale"}}
        assert shown["stale"] is False
    assert status["health"] == {"gray": {"consumed": 40, "failed": 2, "sent_back": 1, "dead_lettered": 0,
                                         "p50_ms": 1.5, "p99_ms": 9.25},
                                "normal": {"consumed": 300, "failed": 0, "sent_back": 0, "dead_lettered": 0,
                                           "p50_ms": 0.5, "p99_ms": 2.0}}
    assert (status["gray_backlog"], status["gray_queues"], status["stale_clients"], status["broker_sets"],
            status["lag"]) == (0, [], [], [], {"gray": 0, "normal": 0})
    [lane] = status["lanes"]
    assert (lane["lane"], sorted(lane["clients"])) == ("gray", ["p2 (producer)", "v2 (consumer)"])


def test_gray_flag_prints_the_desired_flag_the_name_server_answered(ns_url: str) -> None:
    rest(ns_url, "POST", "/v1/clients/heartbeat", json={"group": GROUP, "client_id": "c1", "role": "consumer"})
    result = cli(ns_url, "gray", "flag", GROUP, "c1", "on", "--reason", "shapes")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{GROUP}/c1: explicit flag on; desired now gray\n"
    result = cli(ns_url, "gray", "flag", GROUP, "c1", "off")
    assert result.stdout == (f"{GROUP}/c1: explicit flag off; desired now normal (a gray client drains its gray "
                             "queues before flipping)\n")


def test_gray_status_lists_a_page_of_clients_with_the_counts_of_all_and_json_keeps_every_client_by_default(
        ns_url: str) -> None:
    for i in range(5):
        rest(ns_url, "POST", "/v1/clients/heartbeat", json={"group": GROUP, "client_id": f"c{i}", "role": "consumer",
                                                            "gray": i == 0, "state": "GRAY" if i == 0 else "NORMAL"})
    rest(ns_url, "POST", "/v1/clients/heartbeat", json={"group": GROUP, "client_id": "p0", "role": "producer"})
    cli(ns_url, "gray", "switch", GROUP, "on")
    everything = printed(ns_url, "gray", "status", GROUP, "--json")
    assert set(everything) == STATUS_KEYS and len(everything["clients"]) == 6  # as before: every client
    page = printed(ns_url, "gray", "status", GROUP, "--json", "--limit", "2")
    assert set(page) == STATUS_KEYS | {"clients_total", "clients_more"}
    assert page["clients"] == everything["clients"][:2]
    assert (page["clients_total"], page["clients_more"]) == (6, 4)
    assert {k: v for k, v in page.items() if k not in ("clients", "clients_total", "clients_more")} == {
        k: v for k, v in everything.items() if k != "clients"}
    text = cli(ns_url, "gray", "status", GROUP, "--limit", "2").stdout.splitlines()
    assert "clients: 6 live (consumer: gray 1, normal 4; producer: normal 1), 0 stale" in text
    assert [line.split()[0] for line in text if line.startswith(("c", "p")) and line.split()[0] in
            {"c0", "c1", "c2", "c3", "c4", "p0"}] == ["c0", "c1"]
    assert "... 4 more client(s) not listed: --limit N lists the first N, --all every one" in text
    every = cli(ns_url, "gray", "status", GROUP, "--all").stdout
    assert "p0" in every and "more client(s)" not in every
    refused = cli(ns_url, "gray", "status", GROUP, "--limit", "0")
    assert refused.returncode == 2 and "expected 1 or more" in refused.stderr


def test_the_python_api_walks_a_groups_clients_page_by_page(ns_url: str) -> None:
    for i in range(5):
        rest(ns_url, "POST", "/v1/clients/heartbeat", json={"group": GROUP, "client_id": f"c{i}", "role": "consumer"})

    async def walk() -> list[tuple[list[str], int | None, int | None]]:
        ns = NameServerClient(ns_url, token=ADMIN)
        try:
            pages, offset = [], 0
            while offset is not None:
                page = await ns.group_clients(GROUP, limit=2, offset=offset)
                pages.append(([c.client_id for c in page.clients], page.total, page.next_offset))
                offset = page.next_offset
            every = await ns.group_clients(GROUP)
            pages.append(([c.client_id for c in every.clients], every.total, every.next_offset))
            return pages
        finally:
            await ns.close()

    assert asyncio.run(walk()) == [(["c0", "c1"], 5, 2), (["c2", "c3"], 5, 4), (["c4"], 5, None),
                                   (["c0", "c1", "c2", "c3", "c4"], 5, None)]
