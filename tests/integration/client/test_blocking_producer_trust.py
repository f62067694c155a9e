"""BlockingProducer's authentication and TLS on real processes: a principal's token opens the name server and the
broker, a bad one is refused at start with one line; over TLS it sends when it trusts the CA and stops with one
line when it does not."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from graymq.client import BlockingProducer, ClientConfig, Message
from graymq.devkit.processes import GraymqProcess
from graymq.protocol.errors import ConfigError, UnauthorizedError
from graymq.protocol.tls import client_context
from tests.integration.test_tls import BROKER as TLS_BROKER
from tests.integration.test_tls import TOPIC as TLS_TOPIC
from tests.integration.test_tls import TlsCluster, tls_cluster  # noqa: F401 - the module's TLS cluster fixture
from tests.support.trust import add_principal, cli, start_secure_broker, start_secure_nameserver

pytestmark = pytest.mark.integration


def test_a_principal_token_sends_and_a_bad_token_is_refused_at_start_in_one_line(
        graymq_process: GraymqProcess, fresh_pg_url: str, tmp_path: Path) -> None:
    ns_url = start_secure_nameserver(graymq_process, fresh_pg_url)
    start_secure_broker(graymq_process, ns_url, "broker-a", add_principal(ns_url, "broker-a", "--broker"),
                        tmp_path / "store")
    created = cli(ns_url, "topic", "create", "TOPIC_BLOCKING_AUTH", "--queues", "2", "--gray-queues", "0")
    assert created.returncode == 0, created.stderr
    token = add_principal(ns_url, "app", "--produce", "TOPIC_BLOCKING_*")
    with BlockingProducer("P_BLOCKING_AUTH", ns_url, token=token) as producer:
        assert producer.send(Message("TOPIC_BLOCKING_AUTH", b"with a token")).queue.broker_name == "broker-a"
    refused = BlockingProducer("P_BLOCKING_AUTH", ns_url, token="not-a-token")
    with pytest.raises(UnauthorizedError) as raised:
        refused.start()
    assert "\n" not in str(raised.value) and "GRAYMQ_TOKEN" in str(raised.value)
    assert not refused.started


def test_over_tls_it_sends_trusting_the_ca_and_stops_in_one_line_without_it(
        tls_cluster: TlsCluster, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811 - the imported fixture
    monkeypatch.setenv("GRAYMQ_TLS_CA", str(tls_cluster.files.ca))  # the name server's https
    trusting = ClientConfig.from_env(tls_cluster.url, tls=client_context(tls_cluster.files.ca))
    with BlockingProducer("P_BLOCKING_TLS", config=trusting) as producer:
        assert producer.send(Message(TLS_TOPIC, b"over tls")).queue.broker_name == TLS_BROKER
    untrusting = ClientConfig.from_env(tls_cluster.url, tls=ssl.create_default_context())  # the system's store
    with (BlockingProducer("P_BLOCKING_TLS", config=untrusting) as producer,
          pytest.raises(ConfigError, match="certificate verify failed") as raised):
        producer.send(Message(TLS_TOPIC, b"not trusted"))
    assert "\n" not in str(raised.value)
