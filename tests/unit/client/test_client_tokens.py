"""Client tokens: GRAYMQ_TOKEN on client calls, GRAYMQ_ADMIN_TOKEN only on admin calls, Spark's token option."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from graymq.client.spark.options import SourceOptions
from graymq.nameserver_api.client import NameServerClient, UnauthorizedError
from tests.support.records import heartbeat_answer_json


def test_client_calls_send_the_client_token_and_admin_calls_the_admin_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAYMQ_TOKEN", "from-env")  # never read by the name-server client itself
    seen: list[tuple[str, str | None]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.url.path, request.headers.get("Authorization")))
        if request.url.path.startswith("/v1/topics/"):
            return httpx.Response(403, json={"error": "FORBIDDEN", "detail": "principal app may not administer"})
        return httpx.Response(200, json=heartbeat_answer_json())

    async def go() -> None:
        ns = NameServerClient("http://ns.test", token="client-secret", admin_token="admin-secret")
        ns._http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
        await ns.client_heartbeat({"group": "g"})
        with pytest.raises(UnauthorizedError, match="FORBIDDEN: principal app may not administer"):
            await ns.put_topic("T", 4, 1)
        await ns.close()

    asyncio.run(go())
    assert seen == [("/v1/clients/heartbeat", "Bearer client-secret"), ("/v1/topics/T", "Bearer admin-secret")]


def test_no_token_configured_sends_no_authorization(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GRAYMQ_TOKEN", raising=False)
    monkeypatch.delenv("GRAYMQ_ADMIN_TOKEN", raising=False)
    ns = NameServerClient("http://ns.test")
    assert (ns.token, ns.admin_token) == (None, None)
    assert NameServerClient("http://ns.test", token="t").token == "t"


def test_the_spark_token_option_travels_with_the_options_but_not_in_their_repr() -> None:
    options = SourceOptions.parse({"nameserver": "http://ns:9876", "topic": "T", "group": "g", "token": "s3cret"})
    assert options.token == "s3cret" and "s3cret" not in repr(options)
    assert SourceOptions.parse({"nameserver": "http://ns:9876", "topic": "T", "group": "g"}).token is None
