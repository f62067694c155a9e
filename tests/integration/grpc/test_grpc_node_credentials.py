"""The stock Node.js SDK outside dev mode: signed with a principal's credentials (an access key and secret key from
``principal add --access-key``, or its token as both) it sends within the principal's rights; a wrong secret or a
topic beyond its rights is refused with RocketMQ's status for it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.node_sdk import node_sdk
from tests.support.trust import StartProcess, add_principal, cli, start_secure_grpc_broker, start_secure_nameserver

pytestmark = pytest.mark.integration

TOPIC = "ORDER_SHIPPED"


def test_a_principals_credentials_sign_node_sends_and_bad_ones_are_refused(
        graymq_process: StartProcess, fresh_pg_url: str, tmp_path: Path, node_sdk_dir: Path) -> None:
    ns_url = start_secure_nameserver(graymq_process, fresh_pg_url)
    broker_token = add_principal(ns_url, "broker-a", "--broker")
    orders = add_principal(ns_url, "orders", "--produce", "ORDER_*")
    issued = cli(ns_url, "principal", "add", "shipping", "--produce", "ORDER_*", "--access-key", "--json")
    assert issued.returncode == 0, issued.stderr
    keys = json.loads(issued.stdout)
    other = add_principal(ns_url, "other", "--produce", "OTHER_*")
    endpoint = start_secure_grpc_broker(graymq_process, ns_url, broker_token, tmp_path / "broker-a", TOPIC)[1]
    spec = {"endpoint": endpoint, "topic": TOPIC, "messages": [{"body": "shipped-1"}]}

    for name, (ak, sk) in {"token": (orders, orders), "access-key": (keys["access_key"], keys["secret_key"])}.items():
        sent = node_sdk({**spec, "ak": ak, "sk": sk}, tmp_path / name, sdk=node_sdk_dir)
        assert len(sent) == 1 and "message_id" in sent[0], (name, sent)

    refusals = {"wrong-secret": (orders, "not-the-secret", "invalid credentials"),
                "wrong-secret-key": (keys["access_key"], "not-the-secret", "invalid credentials"),
                "beyond-rights": (other, other, "principal other may not produce to or consume topic")}
    for name, (ak, sk, why) in refusals.items():
        (refused,) = node_sdk({**spec, "ak": ak, "sk": sk}, tmp_path / name, sdk=node_sdk_dir)
        assert "startup_error" in refused and why in refused["startup_error"], (name, refused)
