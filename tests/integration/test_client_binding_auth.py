"""Trust between clients on real processes (PostgreSQL name server): a client belongs to the principal that
registered it, so another principal of the same group cannot spoof its gray state or unregister it; and brokers
learn the bootstrap admin tokens with the principals' digests."""

from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor
from threading import Barrier

import httpx
import pytest

from tests.support.trust import ADMIN, SECURE_ENV, StartProcess, add_principal, bearer, start_secure_nameserver

pytestmark = pytest.mark.integration


@pytest.fixture
def ns_url(graymq_process: StartProcess, fresh_pg_url: str) -> str:
    return start_secure_nameserver(graymq_process, fresh_pg_url)


def test_a_principal_cannot_spoof_or_unregister_a_client_another_principal_registered(ns_url: str) -> None:
    app_a = add_principal(ns_url, "app-a", "--consume", "billing")
    app_b = add_principal(ns_url, "app-b", "--consume", "billing")
    gray = {"group": "billing", "client_id": "c1", "role": "consumer", "gray": True, "state": "GRAY"}
    belongs = "FORBIDDEN: principal app-b may not act as client c1 (consumer) of group billing: it belongs to " \
              "principal app-a"
    with httpx.Client(base_url=ns_url, timeout=30) as http:
        assert http.post("/v1/clients/heartbeat", json=gray, headers=bearer(app_a)).status_code == 200
        refusals = [
            http.post("/v1/clients/heartbeat", json=gray | {"gray": False, "state": "NORMAL"}, headers=bearer(app_b)),
            http.post("/v1/clients/watch", json=gray | {"timeout_s": 1}, headers=bearer(app_b)),
            http.delete("/v1/groups/billing/clients/c1", headers=bearer(app_b)),
        ]
        for refused in refusals:
            assert refused.status_code == 403, refused.text
            assert f"{refused.json()['error']}: {refused.json()['detail']}" == belongs
        [client] = http.get("/v1/groups/billing/clients", headers=bearer(ADMIN)).json()["clients"]
        assert (client["client_id"], client["gray"], client["state"]) == ("c1", True, "GRAY")
        assert http.delete("/v1/groups/billing/clients/c1", headers=bearer(ADMIN)).status_code == 204
        assert http.get("/v1/groups/billing/clients", headers=bearer(ADMIN)).json()["clients"] == []
        # unregistered, the id is free: app-b claims it, and app-a is now the stranger
        assert http.post("/v1/clients/heartbeat", json=gray, headers=bearer(app_b)).status_code == 200
        assert http.post("/v1/clients/heartbeat", json=gray, headers=bearer(app_a)).status_code == 403


def test_a_live_client_id_belongs_to_its_principal_in_every_role(ns_url: str) -> None:
    app_a = add_principal(ns_url, "app-a", "--consume", "billing", "--produce", "ORDER_*")
    app_b = add_principal(ns_url, "app-b", "--consume", "billing", "--produce", "ORDER_*")
    beat = {"group": "billing", "client_id": "c1", "role": "consumer"}
    with httpx.Client(base_url=ns_url, timeout=30) as http:
        assert http.post("/v1/clients/heartbeat", json=beat, headers=bearer(app_a)).status_code == 200
        for role in ("producer", "spark"):
            reused = http.post("/v1/clients/heartbeat", json=beat | {"role": role}, headers=bearer(app_b))
            assert reused.status_code == 403, (role, reused.text)
            assert reused.json()["detail"] == "principal app-b may not act as client c1 (consumer) of group billing: " \
                                              "it belongs to principal app-a"
        # its own principal uses it in every role; an admin acts on it without taking it over
        for token in (app_a, ADMIN):
            assert http.post("/v1/clients/heartbeat", json=beat | {"role": "producer"},
                             headers=bearer(token)).status_code == 200
        listing = http.get("/v1/groups/billing/clients", headers=bearer(ADMIN)).json()["clients"]
        assert sorted((c["client_id"], c["role"]) for c in listing) == [("c1", "consumer"), ("c1", "producer")]


def test_two_principals_registering_one_client_id_at_once_one_wins(ns_url: str) -> None:
    tokens = {name: add_principal(ns_url, name, "--consume", "race") for name in ("app-a", "app-b")}
    rounds = 20
    barrier = Barrier(2)

    def register(name: str) -> list[int]:
        codes = []
        with httpx.Client(base_url=ns_url, timeout=30, headers=bearer(tokens[name])) as http:
            for i in range(rounds):
                barrier.wait(timeout=30)
                beat = {"group": "race", "client_id": f"c{i}", "role": "consumer"}
                codes.append(http.post("/v1/clients/heartbeat", json=beat).status_code)
        return codes

    with ThreadPoolExecutor(2) as pool:
        a_codes, b_codes = pool.map(register, tokens)
    assert [sorted(pair) for pair in zip(a_codes, b_codes, strict=True)] == [[200, 403]] * rounds, (a_codes, b_codes)


def test_brokers_learn_the_bootstrap_admin_tokens_with_the_principals_and_their_version_follows_them(
    graymq_process: StartProcess, fresh_pg_url: str
) -> None:
    ns_url = start_secure_nameserver(graymq_process, fresh_pg_url, GRAYMQ_ADMIN_TOKENS=f"ops={ADMIN},ci=ci-secret-1")
    broker = add_principal(ns_url, "broker-a", "--broker")
    first = httpx.get(f"{ns_url}/v1/principals/digests", headers=bearer(broker), timeout=10).json()
    entries = {(p["name"], p["admin"], p["broker"]): p["token_sha256"] for p in first["principals"]}
    assert entries == {
        ("broker-a", False, True): hashlib.sha256(broker.encode()).hexdigest(),
        ("ops", True, False): hashlib.sha256(ADMIN.encode()).hexdigest(),
        ("ci", True, False): hashlib.sha256(b"ci-secret-1").hexdigest(),
    }
    # another replica on the same database, its admin tokens changed: another version
    rotated = start_secure_nameserver(graymq_process, fresh_pg_url, GRAYMQ_ADMIN_TOKENS=f"ops={ADMIN},ci=ci-secret-2")
    second = httpx.get(f"{rotated}/v1/principals/digests", headers=bearer(broker), timeout=10).json()
    assert hashlib.sha256(b"ci-secret-2").hexdigest() in {p["token_sha256"] for p in second["principals"]}
    assert second["version"] != first["version"]
    same = httpx.get(f"{ns_url}/v1/principals/digests", headers=bearer(broker), timeout=10).json()
    assert same["version"] == first["version"]


def test_dev_mode_digests_never_carry_the_built_in_dev_token(graymq_process: StartProcess, fresh_pg_url: str) -> None:
    proc = graymq_process("nameserver", "--port", "0", "--db", fresh_pg_url, "--migrate", "--dev",
                          env={**SECURE_ENV, "GRAYMQ_ADMIN_TOKENS": "ops=dev-token,ci=ci-secret-1"})
    assert proc.ready_info is not None
    answer = httpx.get(f"{proc.ready_info['url']}/v1/principals/digests", timeout=10).json()
    assert [(p["name"], p["token_sha256"]) for p in answer["principals"]] == [
        ("ci", hashlib.sha256(b"ci-secret-1").hexdigest())]
