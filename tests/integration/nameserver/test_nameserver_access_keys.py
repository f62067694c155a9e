"""Access keys on PostgreSQL: a principal added with one gets an access key and secret key shown once, listed
without the secret; brokers (and only callers with the broker or admin right) read the secret with the digests;
``ACCESS_KEY:SECRET_KEY`` authenticates as the principal (how a broker registers a stock client); rotating issues
a new secret for the same key and the old one stops working."""

from __future__ import annotations

import uuid

from fastapi.testclient import TestClient
from nameserver_testkit import OPS


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def add(api: TestClient, name: str, **body: object) -> dict[str, str]:
    answer = api.post("/v1/principals", json={"name": name, **body}, headers=OPS)
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


def heartbeat(api: TestClient, credential: str, group: str) -> int:
    body = {"group": group, "client_id": f"pod-{uuid.uuid4().hex[:6]}@1@0@x", "role": "producer", "topics": [group]}
    return api.post("/v1/clients/heartbeat", json=body, headers=bearer(credential)).status_code


def test_an_access_key_is_issued_once_listed_without_its_secret_and_authenticates_with_it(api: TestClient) -> None:
    name = f"orders_{uuid.uuid4().hex[:6]}"
    issued = add(api, name, produce=["ORDER_*"], access_key=True)
    access_key, secret = issued["access_key"], issued["secret_key"]
    assert access_key.startswith("GMQAK") and len(secret) >= 32 and ":" not in access_key + secret
    listed = {p["name"]: p for p in api.get("/v1/principals", headers=OPS).json()}
    assert listed[name]["access_key"] == access_key and "secret_key" not in listed[name]
    digests = {p["name"]: p for p in api.get("/v1/principals/digests", headers=OPS).json()["principals"]}
    assert (digests[name]["access_key"], digests[name]["secret_key"]) == (access_key, secret)
    assert api.get("/v1/principals/digests", headers=bearer(issued["token"])).status_code == 403  # not a broker

    assert heartbeat(api, f"{access_key}:{secret}", "ORDER_PAID") == 200  # the principal's rights
    assert heartbeat(api, f"{access_key}:{secret}", "OTHER") == 403
    assert heartbeat(api, f"{access_key}:wrong", "ORDER_PAID") == 401
    assert heartbeat(api, f"{access_key}:", "ORDER_PAID") == 401


def test_rotating_gives_the_access_key_a_new_secret_and_the_old_one_stops_working(api: TestClient) -> None:
    name = f"rot_{uuid.uuid4().hex[:6]}"
    issued = add(api, name, produce=["ORDER_*"], access_key=True)
    rotated = api.post(f"/v1/principals/{name}/rotate", headers=OPS).json()
    assert rotated["access_key"] == issued["access_key"] and rotated["secret_key"] != issued["secret_key"]
    assert heartbeat(api, f"{issued['access_key']}:{issued['secret_key']}", "ORDER_PAID") == 401
    assert heartbeat(api, f"{rotated['access_key']}:{rotated['secret_key']}", "ORDER_PAID") == 200


def test_a_principal_without_an_access_key_has_none_and_cannot_sign_in_with_an_empty_secret(api: TestClient) -> None:
    name = f"plain_{uuid.uuid4().hex[:6]}"
    issued = add(api, name, produce=["ORDER_*"])
    assert issued.get("access_key") is None and issued.get("secret_key") is None
    rotated = api.post(f"/v1/principals/{name}/rotate", headers=OPS).json()
    assert rotated.get("access_key") is None and rotated.get("secret_key") is None
    assert heartbeat(api, ":", "ORDER_PAID") == 401
