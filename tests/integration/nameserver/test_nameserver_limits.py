"""Bounds on what one request may carry: body size (declared or streamed), heartbeat labels and topics."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from nameserver_testkit import serve

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def small(db_url: str) -> Iterator[TestClient]:
    with serve(db_url, max_body_bytes=4096) as client:
        yield client


def test_a_body_over_the_limit_is_a_413_whether_declared_or_streamed(small: TestClient) -> None:
    body = b'{"group": "g", "client_id": "c1", "role": "consumer", "labels": {"k": "' + b"x" * 8000 + b'"}}'
    declared = small.post("/v1/clients/heartbeat", content=body, headers={"Content-Type": "application/json"})
    assert declared.status_code == 413 and "exceeds 4096 bytes" in declared.json()["detail"]

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 1000):
            yield body[start:start + 1000]

    streamed = small.post("/v1/clients/heartbeat", content=chunks(), headers={"Content-Type": "application/json"})
    assert streamed.status_code == 413, streamed.text
    assert small.post("/v1/clients/heartbeat", json={"group": "g", "client_id": "c1", "role": "consumer"}
                      ).status_code == 200


def test_heartbeats_carry_at_most_64_labels_and_1000_topics(api: TestClient) -> None:
    base = {"group": "g_limits", "client_id": "c1", "role": "consumer"}
    labels = {f"k{i}": "v" for i in range(65)}
    assert api.post("/v1/clients/heartbeat", json=base | {"labels": labels}).status_code == 422
    topics = [f"T{i}" for i in range(1001)]
    assert api.post("/v1/clients/heartbeat", json=base | {"topics": topics}).status_code == 422
    assert api.post("/v1/clients/heartbeat", json=base | {"topics": topics[:1000]}).status_code == 200
