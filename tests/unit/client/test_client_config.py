"""``ClientConfig.from_env()`` is the client library's one reader of the environment; explicit values win over
it; a client takes a config or its own keyword arguments, not both; a producer's tuning is ``ProducerSettings``."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from graymq.client import Producer
from graymq.client.config import ClientConfig
from graymq.client.instance import ClientInstance
from graymq.client.producer_settings import ProducerSettings
from graymq.protocol.broker_client import BrokerClient
from graymq.protocol.errors import BadRequestError, ConfigError

pytestmark = pytest.mark.unit

CLIENT = Path(__file__).resolve().parents[3] / "client"
ENV_READ = re.compile(r"os\.environ\.get|os\.environ\[|os\.getenv|environ\.get")
NAMESERVER_API = CLIENT.parent / "nameserver_api"


def env_readers(package: Path) -> set[str]:
    return {str(path.relative_to(package)) for path in package.rglob("*.py") if ENV_READ.search(path.read_text())}


def test_from_env_is_the_only_reader_of_the_environment_in_client() -> None:
    assert env_readers(CLIENT) == {"config.py"}


def test_the_nameserver_client_never_reads_the_environment() -> None:
    assert env_readers(NAMESERVER_API) == set()


def test_from_env_reads_the_variables_and_explicit_values_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAYMQ_NAMESERVER", "http://a:1, http://b:2")
    monkeypatch.setenv("GRAYMQ_TOKEN", "from-env")
    assert ClientConfig.from_env() == ClientConfig(nameserver=("http://a:1", "http://b:2"), token="from-env")
    config = ClientConfig.from_env(["http://c:3"], token="given", route_ttl_s=5.0)
    assert (config.nameserver, config.token, config.route_ttl_s) == (("http://c:3",), "given", 5.0)


def test_broker_connections_authenticate_with_the_token_of_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAYMQ_TOKEN", " secret ")
    instance = ClientInstance(ClientConfig.from_env("http://127.0.0.1:1"))
    assert (instance.brokers.token, instance.nameserver.token) == ("secret", " secret ")
    assert BrokerClient().token == "" and BrokerClient(token=" t ").token == "t"  # its caller's token, never the env's


def test_a_client_given_a_config_and_name_servers_is_refused() -> None:
    with pytest.raises(ConfigError, match="not both"):
        Producer("P", "http://127.0.0.1:1", config=ClientConfig(nameserver=("http://127.0.0.1:1",)))


def test_a_config_without_name_servers_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GRAYMQ_NAMESERVER", raising=False)
    with pytest.raises(ConfigError, match="GRAYMQ_NAMESERVER"):
        Producer("P")


def test_producer_tuning_comes_from_settings_and_keywords_win() -> None:
    async def scenario() -> None:
        p = Producer("P", "http://127.0.0.1:1", settings=ProducerSettings(retry_times=5, auto_batch=False),
                     retry_times=1)
        assert (p.retry_times, p.auto_batch, p.send_timeout_s) == (1, False, 3.0)
        await p.stop()

    asyncio.run(scenario())
    with pytest.raises(TypeError, match="retry_time"):
        Producer("P", "http://127.0.0.1:1", retry_time=1)
    with pytest.raises(BadRequestError, match="retry_times"):
        ProducerSettings(retry_times=-1)


def test_the_sync_facades_take_a_config_and_share_its_instance() -> None:
    from graymq.client.sync import SyncProducer, SyncPullConsumer

    config = ClientConfig(nameserver=("http://127.0.0.1:1",))
    producer = SyncProducer("P", config=config, retry_times=0)
    consumer = SyncPullConsumer("G", config=config, register=False)
    assert producer.client is consumer.client and producer.retry_times == 0
    consumer.stop()
    producer.stop()
