"""Names and integers in URL paths and bodies follow one rule: 422 naming the rule, never a 500 (PostgreSQL)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from nameserver_testkit import OPS, client_heartbeat

from graymq.protocol.names import CLIENT_ID_RULE, LABEL_KEY_RULE, LABEL_VALUE_RULE, NAME_RULE

pytestmark = pytest.mark.integration

BAD_NAMES = {"long": "g" * 300, "nul": "g\x00", "newline": "g\nx", "space": "g x", "dot": "g.x"}
QUOTED = {k: quote(v, safe="") for k, v in BAD_NAMES.items()}


def field_errors(response: Any) -> list[str]:
    assert response.status_code == 422, response.text
    return [str(e["msg"]) for e in response.json()["detail"]]


@pytest.mark.parametrize("name", QUOTED.values(), ids=QUOTED.keys())
@pytest.mark.parametrize(
    "path",
    ["/v1/groups/{}", "/v1/groups/{}/clients", "/v1/groups/{}/rules", "/v1/groups/{}/cutovers",
     "/v1/topics/{}/route"],
)
def test_a_bad_name_in_a_read_path_is_a_422_with_the_rule(api: TestClient, path: str, name: str) -> None:
    messages = field_errors(api.get(path.format(name), headers=OPS))
    assert any(NAME_RULE in m for m in messages), messages


@pytest.mark.parametrize("name", QUOTED.values(), ids=QUOTED.keys())
def test_a_bad_name_in_a_mutating_path_is_a_422_with_the_rule(api: TestClient, name: str) -> None:
    for method, path, body in [
        ("PUT", f"/v1/topics/{name}", {"queue_nums": 4}),
        ("DELETE", f"/v1/topics/{name}", None),
        ("PUT", f"/v1/groups/{name}/switch", {"enabled": True}),
        ("DELETE", f"/v1/groups/{name}", None),
        ("DELETE", f"/v1/groups/{name}/clients/c1", None),
    ]:
        messages = field_errors(api.request(method, path, json=body, headers=OPS))
        assert any(NAME_RULE in m for m in messages), (method, path, messages)


@pytest.mark.parametrize("client_id", ["c" * 300, "c\x00", "c\n1"], ids=["long", "nul", "newline"])
def test_a_bad_client_id_in_a_path_or_a_heartbeat_is_a_422(api: TestClient, client_id: str) -> None:
    flag = api.put(f"/v1/groups/g_names/clients/{quote(client_id, safe='')}/flag", json={"gray": True}, headers=OPS)
    assert any(CLIENT_ID_RULE in m for m in field_errors(flag))
    beat = api.post("/v1/clients/heartbeat", json={"group": "g_names", "client_id": client_id, "role": "consumer"},
                    headers=OPS)
    assert any(CLIENT_ID_RULE in m for m in field_errors(beat))


def test_heartbeats_with_bad_names_or_labels_are_refused_with_the_rule(api: TestClient) -> None:
    base = {"group": "g_names", "client_id": "c1", "role": "consumer"}
    cases = [
        ({**base, "group": "g\x00"}, NAME_RULE),
        ({**base, "topics": ["T\n"]}, NAME_RULE),
        ({**base, "labels": {"zone\x00": "a"}}, LABEL_KEY_RULE),
        ({**base, "labels": {"zone": "a\x00"}}, LABEL_VALUE_RULE),
        ({**base, "labels": {"zone": "v" * 256}}, LABEL_VALUE_RULE),
    ]
    for body, rule in cases:
        assert any(rule in m for m in field_errors(api.post("/v1/clients/heartbeat", json=body, headers=OPS)))
    broker = {"broker_name": "b\x00", "address": "10.0.0.1:10911"}
    assert any(NAME_RULE in m for m in field_errors(api.post("/v1/brokers/heartbeat", json=broker, headers=OPS)))
    client_heartbeat(api, "g_names", "c1", labels={"app.kubernetes.io/version": "2.1 beta"})


@pytest.mark.parametrize("operation_id", ["99999999999", str(2**63), "0", "-1", "x"])
def test_cutover_ids_out_of_range_are_a_404_or_422_never_a_500(api: TestClient, operation_id: str) -> None:
    response = api.get(f"/v1/cutovers/{operation_id}", headers=OPS)
    assert response.status_code in (404, 422), response.text
    patch = api.patch(f"/v1/cutovers/{operation_id}", json={"step": "x"}, headers=OPS)
    assert patch.status_code in (404, 422), patch.text


def test_free_text_with_a_nul_and_a_non_numeric_operation_header_are_422(api: TestClient) -> None:
    assert api.put("/v1/groups/g_names/switch", json={"enabled": True, "reason": "a\x00"},
                   headers=OPS).status_code == 422
    headers = {**OPS, "X-Graymq-Operation": "not-a-number"}
    assert api.put("/v1/groups/g_names/clients/c1/flag", json={"gray": True}, headers=headers).status_code == 422
    assert api.get("/v1/audit", params={"object_id": "x\x00"}, headers=OPS).status_code == 422
    assert api.get("/v1/audit", params={"limit": 10**12}, headers=OPS).status_code == 422
