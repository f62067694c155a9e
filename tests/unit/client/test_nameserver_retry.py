"""A name server's 503 (its transaction rolled back: a deadlock victim, a pool timeout) is not the end of an
idempotent write: it is sent once more after the answer's Retry-After; other writes and other errors are not."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from graymq.nameserver_api.client import NameServerClient
from graymq.protocol.errors import NameServerError

ROLLED_BACK = {"error": "database unavailable", "detail": "deadlock detected"}
FLAG = {"group": "G", "client_id": "c1", "explicit_gray": True, "clients": []}


def calls_with(answers: list[httpx.Response]) -> tuple[NameServerClient, list[str]]:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.host}")
        return answers.pop(0)

    ns = NameServerClient(["http://ns1.test", "http://ns2.test"])
    ns._http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return ns, seen


def test_a_put_every_name_server_answered_503_is_sent_once_more() -> None:
    busy = httpx.Response(503, json=ROLLED_BACK, headers={"Retry-After": "0"})
    ns, seen = calls_with([busy, busy, httpx.Response(200, json=FLAG)])
    result = asyncio.run(ns.set_flag("G", "c1", True))
    assert result.explicit_gray is True
    assert seen == ["PUT ns1.test", "PUT ns2.test", "PUT ns1.test"]


def test_a_put_answered_503_twice_round_fails_naming_each_answer() -> None:
    busy = httpx.Response(503, json=ROLLED_BACK, headers={"Retry-After": "0"})
    ns, seen = calls_with([busy] * 4)
    with pytest.raises(NameServerError, match="failed on every name server: .*deadlock detected"):
        asyncio.run(ns.set_flag("G", "c1", True))
    assert len(seen) == 4


@pytest.mark.parametrize("status", [500, 502])
def test_other_server_errors_of_a_put_are_not_sent_again(status: int) -> None:
    ns, seen = calls_with([httpx.Response(status, json={"error": "internal error"})] * 2)
    with pytest.raises(NameServerError):
        asyncio.run(ns.set_flag("G", "c1", True))
    assert seen == ["PUT ns1.test", "PUT ns2.test"]


def test_a_post_answered_503_is_not_sent_again() -> None:
    busy = httpx.Response(503, json=ROLLED_BACK, headers={"Retry-After": "0"})
    ns, seen = calls_with([busy, busy])
    with pytest.raises(NameServerError):
        asyncio.run(ns.request("POST", "/v1/clients/heartbeat", json={"group": "G"}))
    assert seen == ["POST ns1.test", "POST ns2.test"]
