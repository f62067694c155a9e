"""Authentication on real processes (PostgreSQL name server): principals managed through the CLI, each abuse
refused with its error, and the legitimate path — a broker, a producer and a consumer with their tokens — working."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.support.trust import (
    ADMIN,
    StartProcess,
    add_principal,
    bearer,
    cli,
    start_secure_broker,
    start_secure_nameserver,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def ns_url(graymq_process: StartProcess, fresh_pg_url: str) -> str:
    return start_secure_nameserver(graymq_process, fresh_pg_url)


def test_principals_are_added_listed_rotated_and_removed_through_the_cli_and_audited(ns_url: str) -> None:
    token = add_principal(ns_url, "app-a", "--produce", "ORDER_*", "--consume", "billing:ORDER_*",
                          "--consume", "audit_*")
    listing = cli(ns_url, "principal", "list", "--json")
    assert listing.returncode == 0, listing.stderr
    [app] = [p for p in json.loads(listing.stdout) if p["name"] == "app-a"]
    assert (app["produce"], app["consume"], app["admin"], app["broker"]) == (
        ["ORDER_*"], ["billing:ORDER_*", "audit_*"], False, False)
    assert token not in listing.stdout
    assert "app-a" in cli(ns_url, "principal", "list").stdout
    with httpx.Client(base_url=ns_url, timeout=10) as http:
        assert http.get("/v1/topics/ORDER_X/route", headers=bearer(token)).status_code == 404  # allowed, unknown
        rotated = cli(ns_url, "principal", "rotate", "app-a", "--json")
        assert rotated.returncode == 0, rotated.stderr
        new_token = json.loads(rotated.stdout)["token"]
        assert new_token != token
        assert http.get("/v1/topics/ORDER_X/route", headers=bearer(token)).status_code == 401
        assert http.get("/v1/topics/ORDER_X/route", headers=bearer(new_token)).status_code == 404
        removed = cli(ns_url, "principal", "remove", "app-a")
        assert removed.returncode == 0, removed.stderr
        assert http.get("/v1/topics/ORDER_X/route", headers=bearer(new_token)).status_code == 401
        audit = http.get("/v1/audit", params={"object_type": "principal"}, headers=bearer(ADMIN)).json()
    assert [(e["action"], e["actor"]) for e in reversed(audit)] == [("add", "ops"), ("rotate", "ops"),
                                                                    ("remove", "ops")]
    assert token not in json.dumps(audit) and new_token not in json.dumps(audit)
    assert cli(ns_url, "principal", "remove", "app-a").stderr.strip() == \
        "graymq principal: principal app-a does not exist"


def test_admin_commands_without_or_with_a_weak_token_fail_with_one_line_naming_the_code(ns_url: str) -> None:
    missing = cli(ns_url, "principal", "list", admin=None)
    assert missing.returncode != 0
    assert len(missing.stderr.strip().splitlines()) == 1 and "UNAUTHORIZED" in missing.stderr
    weak = add_principal(ns_url, "app-b", "--produce", "*")
    forbidden = cli(ns_url, "topic", "create", "ORDER_A", "--queues", "4", "--gray-queues", "1", admin=weak)
    assert forbidden.returncode != 0
    assert len(forbidden.stderr.strip().splitlines()) == 1, forbidden.stderr
    assert "FORBIDDEN: principal app-b may not administer" in forbidden.stderr
    bad = cli(ns_url, "principal", "add", "app c", "--produce", "ORDER_*")
    assert bad.returncode == 2 and "invalid principal name 'app c'" in bad.stderr
    for reads in (["group", "list", "--json"], ["audit", "--json"], ["gray", "status", "g", "--json"]):
        result = cli(ns_url, *reads)  # admin commands read with the admin token alone
        assert "UNAUTHORIZED" not in result.stderr and "FORBIDDEN" not in result.stderr, (reads, result.stderr)


def test_each_name_server_abuse_is_refused_with_its_error(ns_url: str) -> None:
    broker_token = add_principal(ns_url, "broker-a", "--broker")
    app_b = add_principal(ns_url, "app-b", "--consume", "group_b")
    with httpx.Client(base_url=ns_url, timeout=30) as http:
        registration = {"broker_name": "broker-a", "address": "10.0.0.1:10911"}
        assert http.post("/v1/brokers/heartbeat", json=registration, headers=bearer(broker_token)).status_code == 200
        # a heartbeat without a token cannot move broker-a's route elsewhere, nor create topics
        hijack = {"broker_name": "broker-a", "address": "6.6.6.6:10911",
                  "topics": [{"topic": f"T{i}", "queue_nums": 1} for i in range(5000)]}
        refused = http.post("/v1/brokers/heartbeat", json=hijack)
        assert (refused.status_code, refused.json()["error"]) == (401, "UNAUTHORIZED")
        as_client = http.post("/v1/brokers/heartbeat", json=registration | {"address": "6.6.6.6:1"},
                              headers=bearer(app_b))
        assert as_client.status_code == 403 and "may not register brokers" in as_client.json()["detail"]
        brokers = http.get("/v1/brokers", headers=bearer(ADMIN)).json()
        assert [(b["broker_name"], b["address"]) for b in brokers] == [("broker-a", "10.0.0.1:10911")]
        assert http.get("/v1/topics", headers=bearer(ADMIN)).json() == []
        # topic creation is admin-only
        assert http.put("/v1/topics/ORDER", json={"queue_nums": 4}).status_code == 401
        assert http.put("/v1/topics/ORDER", json={"queue_nums": 4}, headers=bearer(app_b)).status_code == 403
        # a gray consumer of group_a cannot be flipped by a principal of another group
        gray = {"group": "group_a", "client_id": "c1", "role": "consumer", "gray": True, "state": "GRAY"}
        assert http.post("/v1/clients/heartbeat", json=gray, headers=bearer(ADMIN)).status_code == 200
        spoof = http.post("/v1/clients/heartbeat", json=gray | {"gray": False, "state": "NORMAL"},
                          headers=bearer(app_b))
        assert spoof.status_code == 403
        assert f"{spoof.json()['error']}: {spoof.json()['detail']}" == \
            "FORBIDDEN: principal app-b may not consume group group_a"
        assert http.post("/v1/clients/heartbeat", json=gray | {"state": "NORMAL"}).status_code == 401
        [client] = http.get("/v1/groups/group_a/clients", headers=bearer(ADMIN)).json()["clients"]
        assert (client["gray"], client["state"]) == (True, "GRAY")
        assert http.delete("/v1/groups/group_a/clients/c1", headers=bearer(app_b)).status_code == 403
        # its own group is fine
        own = {"group": "group_b", "client_id": "c2", "role": "consumer"}
        assert http.post("/v1/clients/heartbeat", json=own, headers=bearer(app_b)).status_code == 200
        # a 10 MB heartbeat is refused before it is stored
        huge = own | {"labels": {"blob": "x" * (10 << 20)}}
        too_large = http.post("/v1/clients/heartbeat", json=huge, headers=bearer(app_b))
        assert too_large.status_code == 413 and "exceeds 1048576 bytes" in too_large.json()["detail"]
        # bad names and ids out of range are a 422 or 404 on PostgreSQL, never a 500
        assert http.get("/v1/groups/g%00x", headers=bearer(ADMIN)).status_code == 422
        assert http.get("/v1/groups/" + "g" * 300, headers=bearer(ADMIN)).status_code == 422
        assert http.get("/v1/cutovers/99999999999", headers=bearer(ADMIN)).status_code in (404, 422)
        # health checks stay open
        assert http.get("/readyz").status_code == 200 and http.get("/metrics").status_code == 200


def test_an_address_failing_authentication_too_often_gets_429_with_retry_after(
    graymq_process: StartProcess, fresh_pg_url: str
) -> None:
    url = start_secure_nameserver(graymq_process, fresh_pg_url, GRAYMQ_AUTH_FAILURE_LIMIT="20")
    with httpx.Client(base_url=url, timeout=10) as http:
        codes = [http.get("/v1/groups", headers=bearer(f"wrong-{i}")).status_code for i in range(500)]
        assert codes[:20] == [401] * 20 and set(codes[20:]) == {429}
        throttled = http.get("/v1/groups", headers=bearer(ADMIN))
        assert throttled.status_code == 429 and int(throttled.headers["Retry-After"]) >= 1
        assert "too many failed authentications" in throttled.json()["detail"]
        assert http.get("/healthz").status_code == 200


def test_dev_mode_runs_with_authentication_off_and_says_so(graymq_process: StartProcess, tmp_path: Path) -> None:
    proc = graymq_process("nameserver", "--port", "0", "--db", f"sqlite:///{tmp_path}/ns.db", "--migrate", "--dev",
                          env={"GRAYMQ_ADMIN_TOKENS": ""})
    assert proc.ready_info is not None
    proc.wait_for_line("dev mode: authentication is off", timeout=10)
    with httpx.Client(base_url=str(proc.ready_info["url"]), timeout=10) as http:
        assert http.put("/v1/topics/DEV_T", json={"queue_nums": 4}).status_code == 201
        beat = {"group": "g", "client_id": "c1", "role": "consumer"}
        assert http.post("/v1/clients/heartbeat", json=beat).status_code == 200


def test_a_producer_and_a_consumer_with_their_tokens_work_end_to_end_through_a_real_broker(
    graymq_process: StartProcess, ns_url: str, tmp_path: Path
) -> None:
    broker_token = add_principal(ns_url, "broker-a", "--broker")
    producer = add_principal(ns_url, "orders-app", "--produce", "ORDER_*")
    consumer = add_principal(ns_url, "billing-app", "--consume", "billing:ORDER_*")
    start_secure_broker(graymq_process, ns_url, "broker-a", broker_token, tmp_path / "broker-a")
    created = cli(ns_url, "topic", "create", "ORDER_PAID", "--queues", "4", "--gray-queues", "1")
    assert created.returncode == 0, created.stderr
    sent = cli(ns_url, "produce", "ORDER_PAID", "--count", "20", "--size", "32", "--json", token=producer,
               admin=None)
    assert sent.returncode == 0, sent.stderr
    assert [json.loads(line)["status"] for line in sent.stdout.splitlines()] == ["SEND_OK"] * 20
    received = cli(ns_url, "consume", "ORDER_PAID", "--group", "billing", "--from", "first", "--max", "20",
                   "--idle-exit", "30", "--json", token=consumer, admin=None)
    assert received.returncode == 0, received.stderr
    assert len([line for line in received.stdout.splitlines() if line.startswith("{")]) == 20
    anonymous = cli(ns_url, "produce", "ORDER_PAID", "--body", "x", token=None, admin=None, timeout=60)
    assert anonymous.returncode != 0 and "UNAUTHORIZED" in anonymous.stderr
    other_topic = cli(ns_url, "produce", "USER_EVENTS", "--body", "x", token=producer, admin=None, timeout=60)
    assert other_topic.returncode != 0 and "FORBIDDEN" in other_topic.stderr


def test_brokers_read_the_principals_token_digests_and_rights_and_a_version_that_follows_changes(
    ns_url: str,
) -> None:
    import hashlib

    broker = add_principal(ns_url, "broker-a", "--broker")
    app = add_principal(ns_url, "app-a", "--consume", "billing:ORDER_*")
    with httpx.Client(base_url=ns_url, timeout=10) as http:
        first = http.get("/v1/principals/digests", headers=bearer(broker))
        assert first.status_code == 200, first.text
        digests = {p["name"]: p for p in first.json()["principals"]}
        assert digests["app-a"]["token_sha256"] == hashlib.sha256(app.encode()).hexdigest()
        assert (digests["app-a"]["consume"], digests["broker-a"]["broker"]) == (["billing:ORDER_*"], True)
        assert app not in first.text and broker not in first.text
        etag = first.headers["ETag"]
        assert etag == f'"{first.json()["version"]}"'
        same = http.get("/v1/principals/digests", headers={**bearer(broker), "If-None-Match": etag})
        assert (same.status_code, same.content, same.headers["ETag"]) == (304, b"", etag)  # the broker's is current
        assert http.get("/v1/principals/digests", headers=bearer(app)).status_code == 403
        batch = http.post("/v1/topic-routes", json={"topics": ["ORDER_X", "PAYROLL"]}, headers=bearer(app))
        assert batch.status_code == 200, batch.text  # each topic as its own request: unknown, and not its to use
        assert [r["status_code"] for r in batch.json()["results"]] == [404, 403], batch.text
        assert http.get("/v1/principals", headers=bearer(broker)).status_code == 403  # the list is admin-only
        assert cli(ns_url, "principal", "rotate", "app-a").returncode == 0
        second = http.get("/v1/principals/digests", headers={**bearer(broker), "If-None-Match": etag}).json()
    assert second["version"] != first.json()["version"]


def test_a_broker_token_registers_only_the_broker_names_it_is_bound_to_and_creates_no_topic(ns_url: str) -> None:
    broker_a = add_principal(ns_url, "broker-a", "--broker")  # no --broker-name: the broker named like it
    fleet = add_principal(ns_url, "fleet", "--broker", "--broker-name", "edge-*", "--broker-name", "rs:1")
    listing = {p["name"]: p for p in json.loads(cli(ns_url, "principal", "list", "--json").stdout)}
    assert (listing["broker-a"]["broker_names"], listing["fleet"]["broker_names"]) == (["broker-a"], ["edge-*", "rs:1"])
    bad = cli(ns_url, "principal", "add", "app-x", "--broker-name", "edge-*")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == ["graymq principal: --broker-name needs --broker"]

    def beat(token: str, name: str, address: str = "10.0.0.1:10911", **extra: object) -> httpx.Response:
        body = {"broker_name": name, "address": address, **extra}
        return http.post("/v1/brokers/heartbeat", json=body, headers=bearer(token))

    def replica(token: str, name: str, replica_id: int) -> httpx.Response:
        body = {"broker_name": name, "replica_id": replica_id, "address": f"10.0.1.{replica_id}:10911",
                "replication": "sync", "epoch": 0, "log_end_offset": 0}
        return http.post("/v1/brokers/replicas/heartbeat", json=body, headers=bearer(token))

    with httpx.Client(base_url=ns_url, timeout=30) as http:
        assert beat(broker_a, "broker-a").status_code == 200
        moved = beat(fleet, "broker-a", "6.6.6.6:10911")  # another broker's token cannot move broker-a's route
        assert (moved.status_code, moved.json()["detail"]) == (
            403, "principal fleet may not register as broker broker-a (its broker names: edge-*, rs:1): graymq "
                 "principal add NAME --broker --broker-name broker-a makes a principal that may (its token as "
                 "GRAYMQ_BROKER_TOKEN), or run the broker under one of its names")
        assert beat(broker_a, "evil-b").status_code == 403
        assert beat(fleet, "edge-1", "10.0.0.2:10911").status_code == 200
        # replica ids: rs:1 covers replica 1 of rs only, neither replica 0 nor rs registered without replicas
        assert replica(fleet, "rs", 1).status_code == 200
        assert replica(fleet, "rs", 0).status_code == 403
        assert beat(fleet, "rs").status_code == 403
        assert replica(broker_a, "evil-b", 0).status_code == 403  # no leader recorded for a name it does not own
        brokers = {b["broker_name"]: b for b in http.get("/v1/brokers", headers=bearer(ADMIN)).json()}
        assert brokers["broker-a"]["address"] == "10.0.0.1:10911" and "evil-b" not in brokers

        # a broker token reports topics: a group's retry topic is recorded, another unconfigured topic is not routed
        topics = [{"topic": "INVENTED", "queue_nums": 4}, {"topic": "%RETRY%billing", "queue_nums": 1}]
        assert beat(broker_a, "broker-a", topics=topics).status_code == 200
        assert [t["topic"] for t in http.get("/v1/topics", headers=bearer(ADMIN)).json()] == ["%RETRY%billing"]
        assert http.get("/v1/topics/INVENTED/route", headers=bearer(ADMIN)).status_code == 404
        assert http.get("/v1/topics/%25RETRY%25billing/route", headers=bearer(ADMIN)).status_code == 200
        # an admin's report still records what it reports (the dev-mode path)
        assert beat(ADMIN, "broker-a", topics=topics).status_code == 200
        assert {t["topic"] for t in http.get("/v1/topics", headers=bearer(ADMIN)).json()} == {
            "INVENTED", "%RETRY%billing"}


def test_in_dev_mode_a_broker_with_a_broker_token_records_the_topics_it_reports(
    graymq_process: StartProcess, fresh_pg_url: str
) -> None:
    """A dev-mode deployment that still hands brokers a token (the chart generates one) keeps auto-created topics."""
    bootstrap = "brokers-bootstrap-secret-0123456789"
    proc = graymq_process("nameserver", "--port", "0", "--db", fresh_pg_url, "--migrate", "--dev",
                          env={"GRAYMQ_BROKER_TOKENS": f"brokers={bootstrap}"})
    assert proc.ready_info is not None
    with httpx.Client(base_url=str(proc.ready_info["url"]), timeout=30) as http:
        body = {"broker_name": "broker-a", "address": "10.0.0.1:10911", "topics": [{"topic": "AUTO", "queue_nums": 4}]}
        assert http.post("/v1/brokers/heartbeat", json=body, headers=bearer(bootstrap)).status_code == 200
        assert [t["topic"] for t in http.get("/v1/topics").json()] == ["AUTO"]
