"""Access keys on the gRPC endpoint without a network: a call signed with an issued access key and secret key is its
principal's; a key unknown to the broker, or a wrong signature (a secret rotated a moment ago), makes it read the
principals once (one read for many callers, none again for an address that failed the same way); wrong signatures
count against the caller's address until it is refused for a while, as wrong tokens are on the broker port."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from graymq.broker_ext.grpc_endpoint.credentials import DATE_TIME_FORMAT, Caller, Credentials, signature
from graymq.broker_ext.grpc_endpoint.status import RocketMQStatusError
from graymq.broker_ext.security.principal_refresh import PrincipalRefresh
from graymq.broker_ext.security.principals import PrincipalTable, token_digest
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from graymq.protocol.throttle import FailedAuthThrottle

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 27, 1, 30, tzinfo=UTC)
AK, SK = "GMQAK0123456789abcdef0123", "the-secret-key"
LIMIT = 3


def signed(access_key: str, secret: str) -> dict[str, str]:
    date_time = NOW.strftime(DATE_TIME_FORMAT)
    return {"x-mq-client-id": "pod@1@0@x", "x-mq-date-time": date_time,
            "authorization": f"MQv2-HMAC-SHA1 Credential={access_key}, SignedHeaders=x-mq-date-time, "
                             f"Signature={signature(secret, date_time)}"}


def principal(name: str, access_key: str | None = None, secret: str | None = None) -> dict[str, Any]:
    return {"name": name, "token_sha256": token_digest(f"gmq_{name}"), "produce": ["ORDER_*"], "consume": [],
            "broker_names": [], "access_key": access_key, "secret_key": secret}


class Endpoint:
    """Credentials over a real principal table and throttle; ``later`` is what the name server lists on a read."""

    def __init__(self, tmp_path: Path, *principals: dict[str, Any]) -> None:
        self.table = PrincipalTable(tmp_path / "principals.json")
        self.table.apply({"version": "1", "principals": list(principals)})
        self.later: list[dict[str, Any]] = list(principals)
        self.reads = 0
        self.credentials = Credentials(self.table, dev_mode=False, throttle=FailedAuthThrottle(LIMIT, 60),
                                       refresh=PrincipalRefresh(self._read, min_interval_s=0.01), now=lambda: NOW)

    async def _read(self) -> None:
        self.reads += 1
        await asyncio.sleep(0.01)  # callers arriving meanwhile wait for this read
        self.table.apply({"version": str(self.reads + 1), "principals": self.later})

    async def call(self, metadata: dict[str, str], address: str = "10.0.0.1") -> Caller:
        return await self.credentials.authenticate(metadata, f"ipv4:{address}:5000")


async def refused(call: Any) -> str:
    with pytest.raises(RocketMQStatusError) as refusal:
        await call
    assert refusal.value.code == v2.UNAUTHORIZED
    return refusal.value.message


def test_an_access_key_signed_call_is_its_principal_registered_with_the_key_and_secret(tmp_path: Path) -> None:
    endpoint = Endpoint(tmp_path, principal("orders", AK, SK))
    caller = asyncio.run(endpoint.call(signed(AK, SK)))
    assert caller.principal.name == "orders" and caller.token == f"{AK}:{SK}"  # the name server's bearer for it
    assert caller.labels["principal"] == "orders"
    assert asyncio.run(endpoint.call(signed("gmq_orders", "gmq_orders"))).token == "gmq_orders"  # token as both
    assert endpoint.reads == 0
    assert "does not match" in asyncio.run(refused(endpoint.call(signed(AK, "gmq_orders"))))
    assert endpoint.reads == 1  # a secret rotated a moment ago would be learned by that read


def test_a_secret_rotated_a_moment_ago_works_after_one_read(tmp_path: Path) -> None:
    endpoint = Endpoint(tmp_path, principal("orders", AK, SK))
    endpoint.later = [principal("orders", AK, "rotated")]
    assert asyncio.run(endpoint.call(signed(AK, "rotated"))).principal.name == "orders"
    assert "does not match" in asyncio.run(refused(endpoint.call(signed(AK, SK), "10.0.0.9")))
    assert endpoint.reads == 2


def test_an_access_key_added_a_moment_ago_works_after_one_read_shared_by_every_caller(tmp_path: Path) -> None:
    endpoint = Endpoint(tmp_path)
    endpoint.later = [principal("orders", AK, SK)]

    async def many() -> list[Caller]:
        return await asyncio.gather(*(endpoint.call(signed(AK, SK), f"10.0.0.{i}") for i in range(8)))

    assert {c.principal.name for c in asyncio.run(many())} == {"orders"}
    assert endpoint.reads == 1


def test_an_unknown_access_key_is_read_for_once_per_address_and_window(tmp_path: Path) -> None:
    endpoint = Endpoint(tmp_path)

    async def twice() -> None:
        for _ in range(2):
            assert "unknown access key" in await refused(endpoint.call(signed("GMQAKnope", "x")))

    asyncio.run(twice())
    assert endpoint.reads == 1  # the second attempt of that address does not make the broker read again


def test_repeated_bad_signatures_from_one_address_are_throttled_and_other_addresses_are_not(tmp_path: Path) -> None:
    endpoint = Endpoint(tmp_path, principal("orders", AK, SK))

    async def guesses() -> None:
        for guess in range(LIMIT):
            assert "does not match" in await refused(endpoint.call(signed(AK, f"guess-{guess}")))
        assert "too many failed authentications from ipv4:10.0.0.1" in await refused(endpoint.call(signed(AK, SK)))
        assert (await endpoint.call(signed(AK, SK), "10.0.0.2")).principal.name == "orders"

    asyncio.run(guesses())
    assert endpoint.reads == LIMIT  # each guess may have met a rotation: at most one read per interval
