"""The REST API on PostgreSQL: routes, heartbeats, flags, rules, switch, cutovers, audit, errors."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient
from nameserver_testkit import CI, OPS, broker_heartbeat, client_heartbeat, serve, wait_until

from tests.support.metrics import parse_metrics

pytestmark = pytest.mark.integration


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def error_of(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert set(body) == {"error", "detail"}
    return body


# -- topics, brokers and routes -------------------------------------------------------------


def test_topic_created_through_the_api_is_handed_to_every_broker_at_its_next_heartbeat(
    api: TestClient,
) -> None:
    topic = unique("T")
    created = api.put(f"/v1/topics/{topic}", json={"queue_nums": 8, "gray_queue_nums": 3}, headers=OPS)
    assert created.status_code == 201
    assert created.json()["perm"] == 6
    for broker in (unique("b"), unique("b")):
        answer = broker_heartbeat(api, broker)
        assert {"topic": topic, "queue_nums": 8, "gray_queue_nums": 3, "perm": 6} in answer["topics"]
        assert answer["lease_seconds"] == 120
    changed = api.put(
        f"/v1/topics/{topic}", json={"queue_nums": 8, "gray_queue_nums": 2, "perm": 4}, headers=OPS
    )
    assert changed.status_code == 200
    listed = {t["topic"]: t for t in api.get("/v1/topics").json()}
    assert (listed[topic]["gray_queue_nums"], listed[topic]["perm"]) == (2, 4)


def test_route_lists_live_brokers_carrying_the_topic_with_their_reported_layout(api: TestClient) -> None:
    topic, other = unique("T"), unique("T")
    b1, b2, b3 = unique("b1"), unique("b2"), unique("b3")
    broker_heartbeat(api, b1, (topic, 6, 2))
    broker_heartbeat(api, b2, (topic, 4, 0))
    broker_heartbeat(api, b3, (other, 4, 0))
    route = api.get(f"/v1/topics/{topic}/route").json()
    assert route["topic"] == topic
    assert (route["queue_nums"], route["gray_queue_nums"]) == (6, 2)  # recorded from the first report
    brokers = {b["broker_name"]: b for b in route["brokers"]}
    assert set(brokers) == {b1, b2}
    assert (brokers[b2]["queue_nums"], brokers[b2]["gray_queue_nums"], brokers[b2]["perm"]) == (4, 0, 6)
    assert brokers[b1]["address"] == f"10.0.0.{len(b1)}:10911"
    # A topic the name server did not know is recorded from the broker's report.
    assert other in {t["topic"] for t in api.get("/v1/topics").json()}
    # The broker's next heartbeat without the topic removes its route.
    broker_heartbeat(api, b2)
    assert {b["broker_name"] for b in api.get(f"/v1/topics/{topic}/route").json()["brokers"]} == {b1}


def test_a_brokers_grpc_address_is_stored_and_routed_and_dropped_when_it_registers_without_one(
        api: TestClient) -> None:
    topic, broker = unique("T"), unique("b")
    body = {"broker_name": broker, "address": "10.0.0.7:10911", "grpc_address": "10.0.0.7:8081",
            "topics": [{"topic": topic, "queue_nums": 4, "gray_queue_nums": 1}]}
    assert api.post("/v1/brokers/heartbeat", json=body).status_code == 200
    (routed,) = api.get(f"/v1/topics/{topic}/route").json()["brokers"]
    assert (routed["address"], routed["grpc_address"]) == ("10.0.0.7:10911", "10.0.0.7:8081")
    listed = {b["broker_name"]: b for b in api.get("/v1/brokers").json()}
    assert listed[broker]["grpc_address"] == "10.0.0.7:8081"
    detail = error_of(api.post("/v1/brokers/heartbeat", json={**body, "grpc_address": "10.0.0.7 8081"}), 422)
    assert detail["detail"][0]["loc"] == ["body", "grpc_address"]
    assert api.post("/v1/brokers/heartbeat", json={k: v for k, v in body.items() if k != "grpc_address"}).is_success
    (routed,) = api.get(f"/v1/topics/{topic}/route").json()["brokers"]
    assert routed["grpc_address"] is None  # restarted without --grpc-port: stock clients are not sent there


def test_configured_topic_no_broker_reported_yet_routes_to_every_live_broker(api: TestClient) -> None:
    broker = unique("b")
    broker_heartbeat(api, broker)
    topic = unique("T")
    assert (
        api.put(f"/v1/topics/{topic}", json={"queue_nums": 6, "gray_queue_nums": 2}, headers=OPS).status_code
        == 201
    )
    route = api.get(f"/v1/topics/{topic}/route").json()
    live = {b["broker_name"] for b in api.get("/v1/brokers").json()}
    assert {b["broker_name"] for b in route["brokers"]} == live
    assert broker in live
    assert all((b["queue_nums"], b["gray_queue_nums"]) == (6, 2) for b in route["brokers"])


def test_unknown_topic_has_no_route(api: TestClient) -> None:
    body = error_of(api.get(f"/v1/topics/{unique('T')}/route"), 404)
    assert "unknown" in body["error"]


def test_brokers_whose_lease_expired_leave_routes_and_the_broker_list(db_url: str) -> None:
    with serve(db_url, broker_lease_seconds=1) as short:
        topic, broker = unique("T"), unique("b")
        assert broker_heartbeat(short, broker, (topic, 4, 2))["lease_seconds"] == 1
        assert broker in route_brokers(short, topic)
        wait_until(lambda: broker not in route_brokers(short, topic), what="lease expiry")
        assert broker not in {b["broker_name"] for b in short.get("/v1/brokers").json()}


def route_brokers(http: TestClient, topic: str) -> set[str]:
    response = http.get(f"/v1/topics/{topic}/route")
    return {b["broker_name"] for b in response.json()["brokers"]} if response.status_code == 200 else set()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"queue_nums": 4, "gray_queue_nums": 5}, "body"),
        ({"queue_nums": 0}, "queue_nums"),
        ({"queue_nums": 4, "gray_queue_nums": -1}, "gray_queue_nums"),
        ({"queue_nums": 4, "perm": 9}, "perm"),
        ({"gray_queue_nums": 1}, "queue_nums"),
    ],
)
def test_invalid_topic_layout_is_422_with_field_details(
    api: TestClient, body: dict[str, Any], field: str
) -> None:
    detail = error_of(api.put(f"/v1/topics/{unique('T')}", json=body, headers=OPS), 422)["detail"]
    assert any(d["loc"][-1] == field and d["msg"] for d in detail), detail


def test_invalid_topic_name_is_422_naming_the_path_parameter(api: TestClient) -> None:
    detail = error_of(api.put("/v1/topics/bad topic!", json={"queue_nums": 4}, headers=OPS), 422)["detail"]
    assert detail[0]["loc"] == ["path", "topic"]
    assert "characters" in detail[0]["msg"]


def test_broker_heartbeat_with_an_inconsistent_layout_is_422(api: TestClient) -> None:
    body = {
        "broker_name": "b",
        "address": "a:1",
        "topics": [{"topic": "T", "queue_nums": 2, "gray_queue_nums": 3}],
    }
    detail = error_of(api.post("/v1/brokers/heartbeat", json=body), 422)["detail"]
    assert detail[0]["loc"][:3] == ["body", "topics", 0]


# -- client heartbeats and flags -------------------------------------------------------------

RULE_V2_GRAY = ({"version": "v2"}, True)

FLAG_CASES = [
    # switch, rules [(selector, gray)], explicit flag (None: not set), labels, desired
    pytest.param(True, [], None, {}, False, id="on-nothing-set-normal"),
    pytest.param(True, [], True, {}, True, id="on-explicit-gray"),
    pytest.param(True, [RULE_V2_GRAY], None, {"version": "v2"}, True, id="on-rule-matches"),
    pytest.param(True, [RULE_V2_GRAY], None, {"version": "v1"}, False, id="on-rule-other-value"),
    pytest.param(True, [RULE_V2_GRAY], False, {"version": "v2"}, False, id="on-explicit-beats-rule"),
    pytest.param(False, [], True, {}, False, id="off-explicit-gray-ignored"),
    pytest.param(False, [RULE_V2_GRAY], None, {"version": "v2"}, False, id="off-rule-ignored"),
    pytest.param(
        True,
        [({"zone": "a"}, False), RULE_V2_GRAY],
        None,
        {"version": "v2", "zone": "a"},
        False,
        id="on-first-matching-rule-wins",
    ),
    pytest.param(
        True,
        [({"version": "v2", "zone": "b"}, True)],
        None,
        {"version": "v2", "zone": "a"},
        False,
        id="on-rule-needs-every-label",
    ),
    pytest.param(True, [({"host": "orders-v2-*"}, True)], None, {"host": "orders-v2-7f9c-x2k"}, True,
                 id="on-glob-rule-matches-the-pods-of-a-deployment"),
    pytest.param(True, [({"host": "orders-v2-*"}, True)], None, {"host": "orders-v1-5d4b-q8z"}, False,
                 id="on-glob-rule-skips-other-pods"),
    pytest.param(True, [({"host": "orders-v2-*"}, True)], None, {"host": "ORDERS-V2-7f9c"}, False,
                 id="on-glob-rule-is-case-sensitive"),
]


@pytest.mark.parametrize(("switch", "rules", "explicit", "labels", "desired"), FLAG_CASES)
def test_desired_gray_follows_switch_explicit_flag_and_first_matching_rule(
    api: TestClient,
    switch: bool,
    rules: list[tuple[dict[str, str], bool]],
    explicit: bool | None,
    labels: dict[str, str],
    desired: bool,
) -> None:
    group, client = unique("g"), unique("c")
    assert api.put(f"/v1/groups/{group}/switch", json={"enabled": switch}, headers=OPS).status_code == 200
    for selector, gray in rules:
        assert api.post(
            f"/v1/groups/{group}/rules", json={"selector": selector, "gray": gray}, headers=OPS
        ).is_success
    client_heartbeat(api, group, client, labels=labels)
    if explicit is not None:
        flag = api.put(f"/v1/groups/{group}/clients/{client}/flag", json={"gray": explicit}, headers=OPS)
        assert flag.status_code == 200, flag.text
        assert flag.json()["clients"][0]["desired_gray"] is desired
    answer = client_heartbeat(api, group, client, labels=labels)
    assert (answer["gray_switch"], answer["explicit_gray"], answer["desired_gray"]) == (
        switch,
        explicit,
        desired,
    )
    (row,) = api.get(f"/v1/groups/{group}/clients").json()["clients"]
    assert (row["explicit_gray"], row["desired_gray"]) == (explicit, desired)


def test_heartbeat_stores_the_reported_flag_and_never_flips_it(api: TestClient) -> None:
    group, client = unique("g"), unique("c")
    client_heartbeat(api, group, client, gray=True, state="GRAY", queues=["T@b:0"])
    api.put(f"/v1/groups/{group}/clients/{client}/flag", json={"gray": False}, headers=OPS)
    answer = client_heartbeat(api, group, client, gray=True, state="DRAINING", queues=["T@b:0"])
    assert (answer["desired_gray"], answer["gray"], answer["state"]) == (False, True, "DRAINING")
    (row,) = api.get(f"/v1/groups/{group}/clients").json()["clients"]
    assert (row["gray"], row["state"], row["queues"]) == (True, "DRAINING", ["T@b:0"])
    client_heartbeat(api, group, client, gray=False, state="NORMAL")
    (row,) = api.get(f"/v1/groups/{group}/clients").json()["clients"]
    assert (row["gray"], row["state"], row["queues"]) == (False, "NORMAL", [])


def test_first_heartbeat_creates_the_group_with_the_gray_switch_on(api: TestClient) -> None:
    group = unique("g")
    answer = client_heartbeat(api, group, "c1", topics=["UNKNOWN_TOPIC"])
    assert (answer["gray_switch"], answer["orphan_policy"], answer["topics"]) == (True, "hold", {})
    assert api.get(f"/v1/groups/{group}").json()["gray_switch"] is True


def test_heartbeat_answers_the_layout_of_the_topics_the_client_uses(api: TestClient) -> None:
    topic = unique("T")
    api.put(f"/v1/topics/{topic}", json={"queue_nums": 6, "gray_queue_nums": 2}, headers=OPS)
    answer = client_heartbeat(api, unique("g"), "c1", topics=[topic])
    assert answer["topics"] == {topic: {"queue_nums": 6, "gray_queue_nums": 2}}


def test_flag_applies_to_every_role_of_the_client_and_null_returns_to_the_rules(api: TestClient) -> None:
    group, client = unique("g"), unique("c")
    for role in ("consumer", "producer"):
        client_heartbeat(api, group, client, role=role, labels={"version": "v2"})
    api.post(f"/v1/groups/{group}/rules", json={"selector": {"version": "v2"}, "gray": True}, headers=OPS)
    result = api.put(f"/v1/groups/{group}/clients/{client}/flag", json={"gray": False}, headers=OPS).json()
    assert [(c["role"], c["explicit_gray"], c["desired_gray"]) for c in result["clients"]] == [
        ("consumer", False, False),
        ("producer", False, False),
    ]
    api.put(f"/v1/groups/{group}/clients/{client}/flag", json={"gray": None}, headers=OPS)
    rows = api.get(f"/v1/groups/{group}/clients").json()["clients"]
    assert [(c["explicit_gray"], c["desired_gray"]) for c in rows] == [(None, True), (None, True)]
    producers = api.get(f"/v1/groups/{group}/clients", params={"role": "producer"}).json()["clients"]
    assert [c["role"] for c in producers] == ["producer"]


def test_a_role_registered_after_the_flag_was_set_takes_the_clients_flag(api: TestClient) -> None:
    group, client = unique("g"), unique("c")
    client_heartbeat(api, group, client, labels={"version": "v2"})
    api.post(f"/v1/groups/{group}/rules", json={"selector": {"version": "v2"}, "gray": True}, headers=OPS)
    api.put(f"/v1/groups/{group}/clients/{client}/flag", json={"gray": False}, headers=OPS)
    producer = client_heartbeat(api, group, client, role="producer", labels={"version": "v2"})
    assert (producer["explicit_gray"], producer["desired_gray"]) == (False, False)
    other = client_heartbeat(api, group, unique("c"), role="producer", labels={"version": "v2"})
    assert (other["explicit_gray"], other["desired_gray"]) == (None, True)


def test_posting_a_rule_with_an_existing_selector_changes_it_in_place(api: TestClient) -> None:
    group = unique("g")
    first = api.post(
        f"/v1/groups/{group}/rules", json={"selector": {"version": "v2"}, "gray": True}, headers=OPS
    )
    assert first.status_code == 201
    again = api.post(
        f"/v1/groups/{group}/rules", json={"selector": {"version": "v2"}, "gray": False}, headers=OPS
    )
    assert again.status_code == 200
    assert again.json()["id"] == first.json()["id"]
    rules = api.get(f"/v1/groups/{group}/rules").json()
    assert [(r["selector"], r["gray"]) for r in rules] == [({"version": "v2"}, False)]
    assert api.delete(f"/v1/groups/{group}/rules/{first.json()['id']}", headers=OPS).status_code == 204
    assert api.get(f"/v1/groups/{group}/rules").json() == []


def test_orphan_policy_is_stored_and_reported_to_clients(api: TestClient) -> None:
    group = unique("g")
    client_heartbeat(api, group, "c1")
    changed = api.put(f"/v1/groups/{group}/orphan-policy", json={"policy": "adopt"}, headers=OPS)
    assert changed.json()["orphan_policy"] == "adopt"
    assert client_heartbeat(api, group, "c1")["orphan_policy"] == "adopt"
    assert api.get(f"/v1/groups/{group}/clients").json()["orphan_policy"] == "adopt"
    detail = error_of(api.put(f"/v1/groups/{group}/orphan-policy", json={"policy": "drop"}, headers=OPS), 422)
    assert detail["detail"][0]["loc"] == ["body", "policy"]


def test_clients_that_stop_heartbeating_leave_the_group_lookup(db_url: str) -> None:
    with serve(db_url, client_expiry_seconds=3) as short:
        group = unique("g")
        client_heartbeat(short, group, "c1")
        assert len(short.get(f"/v1/groups/{group}/clients").json()["clients"]) == 1
        wait_until(
            lambda: short.get(f"/v1/groups/{group}/clients").json()["clients"] == [], what="client expiry"
        )


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"group": "g", "client_id": "c", "role": "broker"}, "role"),
        ({"group": "g", "client_id": "c", "role": "consumer", "state": "DONE"}, "state"),
        ({"group": "g", "role": "consumer"}, "client_id"),
        ({"group": "a/b", "client_id": "c", "role": "consumer"}, "group"),
        ({"group": "g", "client_id": "c", "role": "consumer", "gray": "maybe"}, "gray"),
    ],
)
def test_invalid_client_heartbeat_is_422_naming_the_field(
    api: TestClient, body: dict[str, Any], field: str
) -> None:
    detail = error_of(api.post("/v1/clients/heartbeat", json=body), 422)["detail"]
    assert [d["loc"] for d in detail] == [["body", field]]


# -- not found ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/v1/groups/nope_group", None),
        ("GET", "/v1/groups/nope_group/clients", None),
        ("GET", "/v1/groups/nope_group/rules", None),
        ("GET", "/v1/groups/nope_group/cutovers", None),
        ("PUT", "/v1/groups/nope_group/clients/c1/flag", {"gray": True}),
        ("POST", "/v1/groups/nope_group/cutovers", {"kind": "promote"}),
        ("DELETE", "/v1/groups/nope_group/rules/1", None),
        ("GET", "/v1/cutovers/999999", None),
        ("PATCH", "/v1/cutovers/999999", {"step": "x"}),
    ],
)
def test_unknown_group_client_or_operation_is_404(
    api: TestClient, method: str, path: str, body: dict[str, Any] | None
) -> None:
    body_out = error_of(api.request(method, path, json=body, headers=OPS), 404)
    assert "unknown" in body_out["error"]


def test_unknown_client_of_a_known_group_is_404(api: TestClient) -> None:
    group = unique("g")
    client_heartbeat(api, group, "c1")
    body = error_of(api.put(f"/v1/groups/{group}/clients/ghost/flag", json={"gray": True}, headers=OPS), 404)
    assert "ghost" in body["error"]


# -- authentication --------------------------------------------------------------------------

ADMIN_CALLS = [
    ("PUT", "/v1/topics/AUTH_T", {"queue_nums": 4}),
    ("PUT", "/v1/groups/auth_g/clients/c1/flag", {"gray": True}),
    ("PUT", "/v1/groups/auth_g/switch", {"enabled": False}),
    ("PUT", "/v1/groups/auth_g/orphan-policy", {"policy": "adopt"}),
    ("POST", "/v1/groups/auth_g/rules", {"selector": {"a": "b"}, "gray": True}),
    ("DELETE", "/v1/groups/auth_g/rules/1", None),
    ("POST", "/v1/groups/auth_g/cutovers", {"kind": "promote"}),
    ("PATCH", "/v1/cutovers/1", {"step": "x"}),
]


@pytest.mark.parametrize(("method", "path", "body"), ADMIN_CALLS)
@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": ""},
        {"Authorization": "Bearer wrong"},
        {"Authorization": "Basic b3BzOm9wcy1zZWNyZXQtMQ=="},
        {"Authorization": "Bearer dev-token"},
    ],
    ids=["missing", "wrong-token", "basic-auth", "dev-token-outside-dev-mode"],
)
def test_admin_mutations_without_a_valid_bearer_token_are_401(
    api: TestClient, method: str, path: str, body: dict[str, Any] | None, headers: dict[str, str]
) -> None:
    response = api.request(method, path, json=body, headers=headers)
    body = error_of(response, 401)
    assert body["error"] == "UNAUTHORIZED"
    assert str(body["detail"]).startswith(("missing bearer token", "invalid bearer token"))
    assert response.headers["WWW-Authenticate"] == "Bearer"


def test_rejected_admin_calls_change_nothing(api: TestClient) -> None:
    api.request("PUT", "/v1/topics/AUTH_T", json={"queue_nums": 4}, headers={"Authorization": "Bearer wrong"})
    assert "AUTH_T" not in {t["topic"] for t in api.get("/v1/topics").json()}
    assert api.get("/v1/groups/auth_g").status_code == 404


def test_heartbeats_and_reads_need_a_token_but_health_checks_do_not(api: TestClient) -> None:
    anonymous = {"Authorization": ""}
    beat = api.post("/v1/clients/heartbeat", json={"group": unique("g"), "client_id": "c1", "role": "consumer"},
                    headers=anonymous)
    assert error_of(beat, 401)["error"] == "UNAUTHORIZED"
    broker = api.post("/v1/brokers/heartbeat", json={"broker_name": unique("b"), "address": "10.0.0.9:1"},
                      headers=anonymous)
    assert error_of(broker, 401)["error"] == "UNAUTHORIZED"
    for path in ("/v1/topics", "/v1/brokers", "/v1/groups", "/v1/audit"):
        assert api.get(path, headers=anonymous).status_code == 401, path
    for path in ("/healthz", "/readyz", "/metrics"):
        assert api.get(path, headers=anonymous).status_code == 200, path


# -- audit -----------------------------------------------------------------------------------


def test_every_change_is_audited_with_actor_before_after_and_reason(api: TestClient) -> None:
    group, client = unique("g"), unique("c")
    client_heartbeat(api, group, client)
    api.put(f"/v1/groups/{group}/clients/{client}/flag", json={"gray": True, "reason": "canary"}, headers=CI)
    api.put(
        f"/v1/groups/{group}/clients/{client}/flag",
        json={"gray": None, "reason": "back to rules"},
        headers=OPS,
    )
    api.put(f"/v1/groups/{group}/switch", json={"enabled": False, "reason": "incident 42"}, headers=OPS)
    rule = api.post(
        f"/v1/groups/{group}/rules", json={"selector": {"v": "2"}, "gray": True}, headers=CI
    ).json()
    api.delete(f"/v1/groups/{group}/rules/{rule['id']}", params={"reason": "done"}, headers=OPS)
    entries = api.get("/v1/audit", params={"group": group}).json()
    summary = [
        (e["actor"], e["object_type"], e["action"], e["before"], e["after"], e["reason"]) for e in entries
    ]
    rule_view = {k: rule[k] for k in ("id", "group", "selector", "gray", "position")}
    assert summary[:3] == [
        ("ops", "rule", "delete", {**rule_view, "created_at": summary[0][3]["created_at"]}, None, "done"),
        ("ci", "rule", "create", None, {**rule_view, "created_at": summary[1][4]["created_at"]}, None),
        ("ops", "group", "set_switch", {"gray_switch": True}, {"gray_switch": False}, "incident 42"),
    ]
    assert summary[3:] == [
        (
            "ops",
            "client",
            "set_flag",
            {"explicit_gray": {"consumer": True}},
            {"explicit_gray": {"consumer": None}},
            "back to rules",
        ),
        (
            "ci",
            "client",
            "set_flag",
            {"explicit_gray": {"consumer": None}},
            {"explicit_gray": {"consumer": True}},
            "canary",
        ),
    ]
    assert all(e["group"] == group and e["at"] for e in entries)
    by_object = api.get("/v1/audit", params={"object_type": "client", "object_id": client}).json()
    assert [e["reason"] for e in by_object] == ["back to rules", "canary"]
    assert len(api.get("/v1/audit", params={"group": group, "limit": 2}).json()) == 2


def test_topic_changes_are_audited(api: TestClient) -> None:
    topic = unique("T")
    api.put(f"/v1/topics/{topic}", json={"queue_nums": 4, "reason": "new topic"}, headers=CI)
    api.put(f"/v1/topics/{topic}", json={"queue_nums": 4, "gray_queue_nums": 2}, headers=OPS)
    entries = api.get("/v1/audit", params={"object_type": "topic", "object_id": topic}).json()
    assert [(e["actor"], e["action"], e["reason"]) for e in entries] == [
        ("ops", "update", None),
        ("ci", "create", "new topic"),
    ]
    assert entries[0]["before"]["gray_queue_nums"] == 0 and entries[0]["after"]["gray_queue_nums"] == 2


# -- cutovers --------------------------------------------------------------------------------


def test_flags_are_409_during_a_running_cutover_unless_the_operation_makes_the_change(
    api: TestClient,
) -> None:
    group, client = unique("g"), unique("c")
    client_heartbeat(api, group, client, gray=True, state="GRAY")
    started = api.post(
        f"/v1/groups/{group}/cutovers",
        json={"kind": "promote", "mode": "drain", "producer_groups": ["pg"]},
        headers=OPS,
    )
    assert started.status_code == 201, started.text
    operation = started.json()
    assert (operation["state"], operation["started_by"], operation["producer_groups"]) == (
        "RUNNING",
        "ops",
        ["pg"],
    )
    flag_path = f"/v1/groups/{group}/clients/{client}/flag"

    refused = error_of(api.put(flag_path, json={"gray": False}, headers=OPS), 409)
    assert refused["detail"]["id"] == operation["id"] and refused["detail"]["state"] == "RUNNING"
    error_of(api.put(flag_path, json={"gray": False}, headers={**OPS, "X-Graymq-Operation": "424242"}), 409)
    allowed = api.put(
        flag_path, json={"gray": False}, headers={**OPS, "X-Graymq-Operation": str(operation["id"])}
    )
    assert allowed.status_code == 200
    assert (
        api.get("/v1/audit", params={"object_id": client}).json()[0]["after"]["operation_id"]
        == operation["id"]
    )

    second = error_of(api.post(f"/v1/groups/{group}/cutovers", json={"kind": "rollback"}, headers=OPS), 409)
    assert second["detail"]["id"] == operation["id"]
    assert api.get(f"/v1/groups/{group}").json()["running_cutover"]["id"] == operation["id"]
    running = api.get(f"/v1/groups/{group}/cutovers", params={"state": "RUNNING"}).json()
    assert [op["id"] for op in running] == [operation["id"]]

    step = api.patch(
        f"/v1/cutovers/{operation['id']}", json={"step": "draining gray queues"}, headers=OPS
    ).json()
    assert (step["step"], step["finished_at"]) == ("draining gray queues", None)
    done = api.patch(
        f"/v1/cutovers/{operation['id']}",
        json={"state": "SUCCEEDED", "result": {"gray_backlog": 0}},
        headers=CI,
    ).json()
    assert (done["state"], done["result"], done["step"]) == (
        "SUCCEEDED",
        {"gray_backlog": 0},
        "draining gray queues",
    )
    assert done["finished_at"] is not None
    assert api.get(f"/v1/cutovers/{operation['id']}").json() == done
    assert api.get(f"/v1/groups/{group}/cutovers", params={"state": "RUNNING"}).json() == []

    assert api.put(flag_path, json={"gray": True}, headers=OPS).status_code == 200
    error_of(api.patch(f"/v1/cutovers/{operation['id']}", json={"state": "FAILED"}, headers=OPS), 409)
    assert (
        api.post(
            f"/v1/groups/{group}/cutovers", json={"kind": "rollback", "mode": "adopt"}, headers=OPS
        ).status_code
        == 201
    )
    actions = [
        e["action"] for e in api.get("/v1/audit", params={"object_type": "cutover", "group": group}).json()
    ]
    assert actions == ["start", "update", "update", "start"]


def test_invalid_cutover_bodies_are_422(api: TestClient) -> None:
    group = unique("g")
    client_heartbeat(api, group, "c1")
    detail = error_of(api.post(f"/v1/groups/{group}/cutovers", json={"kind": "upgrade"}, headers=OPS), 422)[
        "detail"
    ]
    assert detail[0]["loc"] == ["body", "kind"]
    op = api.post(f"/v1/groups/{group}/cutovers", json={"kind": "promote"}, headers=OPS).json()
    detail = error_of(api.patch(f"/v1/cutovers/{op['id']}", json={"state": "DONE"}, headers=OPS), 422)[
        "detail"
    ]
    assert detail[0]["loc"] == ["body", "state"]


# -- service endpoints -----------------------------------------------------------------------


def test_openapi_documents_the_api_and_its_bearer_security(api: TestClient) -> None:
    spec = api.get("/openapi.json").json()
    assert "/v1/groups/{group}/clients/{client_id}/flag" in spec["paths"]
    assert spec["paths"]["/v1/topics/{topic}"]["put"]["security"] == [{"HTTPBearer": []}]
    assert spec["paths"]["/v1/clients/heartbeat"]["post"]["security"] == [{"HTTPBearer": []}]
    assert "security" not in spec["paths"]["/healthz"]["get"]


def test_metrics_count_requests_by_route_and_report_live_objects(api: TestClient) -> None:
    group = unique("g")
    client_heartbeat(api, group, "c1", gray=True, state="GRAY")
    client_heartbeat(api, group, "c2")
    api.get("/v1/groups/nope_group")
    metrics = parse_metrics(api.get("/metrics").text)
    assert metrics.value("graymq_nameserver_http_requests_total", method="GET", route="/v1/groups/{group}",
                         status="404") is not None
    assert metrics.value("graymq_nameserver_live_clients", group=group, role="consumer", gray="true",
                         lane="gray") == 1
    assert metrics.value("graymq_nameserver_live_clients", group=group, role="consumer", gray="false",
                         lane="base") == 1
    assert metrics.value("graymq_nameserver_db_errors_total") == 0
    assert metrics.value("graymq_nameserver_live_brokers") is not None


def test_declared_flag_applies_only_when_no_explicit_flag_or_rule_does(api: TestClient) -> None:
    group, client = unique("g"), unique("c")
    answer = api.post("/v1/clients/heartbeat", json={"group": group, "client_id": client, "role": "consumer",
                                                      "declared_gray": True}).json()
    assert answer["desired_gray"] is True  # `graymq consume --gray` starts gray
    api.post(f"/v1/groups/{group}/rules", json={"selector": {"version": "v1"}, "gray": False}, headers=OPS)
    answer = api.post("/v1/clients/heartbeat", json={"group": group, "client_id": client, "role": "consumer",
                                                      "labels": {"version": "v1"}, "declared_gray": True}).json()
    assert answer["desired_gray"] is False  # a matching rule wins over the declaration
    api.put(f"/v1/groups/{group}/clients/{client}/flag", json={"gray": True}, headers=OPS)
    api.put(f"/v1/groups/{group}/switch", json={"enabled": False}, headers=OPS)
    (row,) = api.get(f"/v1/groups/{group}/clients").json()["clients"]
    assert (row["declared_gray"], row["desired_gray"]) == (True, False)  # switch off: everyone normal
