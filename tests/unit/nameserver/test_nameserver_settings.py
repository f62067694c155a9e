"""Settings: admin tokens, dev mode refusals and database URLs."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from graymq.nameserver.auth import actor_for
from graymq.nameserver.settings import InsecureConfigError, NameServerSettings, normalize_db_url, parse_admin_tokens

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def _no_dev_mode_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GRAYMQ_DEV_MODE", raising=False)


def settings(**values: object) -> NameServerSettings:
    return NameServerSettings(**values)  # type: ignore[arg-type]


def test_named_tokens_are_parsed_and_names_become_actors() -> None:
    assert parse_admin_tokens(" ops=secret1, ci=sec=ret2 ,") == {"ops": "secret1", "ci": "sec=ret2"}
    assert settings(admin_tokens="ops=secret1,ci=secret2").token_actors() == {
        "secret1": "ops",
        "secret2": "ci",
    }


@pytest.mark.parametrize("raw", ["secret-without-name", "=secret", "ops=", "bad name=x", "ops=a,ops=b"])
def test_malformed_tokens_are_refused_with_a_message(raw: str) -> None:
    with pytest.raises(ValueError, match="token"):
        parse_admin_tokens(raw)


def test_environment_variables_configure_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAYMQ_ADMIN_TOKENS", "ops=s1")
    monkeypatch.setenv("GRAYMQ_BROKER_LEASE_SECONDS", "7")
    monkeypatch.setenv("GRAYMQ_DEFAULT_GRAY_SWITCH", "false")
    monkeypatch.setenv("GRAYMQ_DB_URL", "postgres://u:p@db:5432/graymq")
    loaded = NameServerSettings()
    assert loaded.admin_tokens == {"ops": "s1"}
    assert (loaded.broker_lease_seconds, loaded.default_gray_switch) == (7, False)
    assert loaded.db_url == "postgresql+psycopg://u:p@db:5432/graymq"


def test_defaults_run_locally_on_sqlite() -> None:
    default = settings()
    assert default.db_url == "sqlite:///./graymq-data/nameserver.db"
    assert (default.host, default.port, default.auto_migrate, default.dev_mode) == (
        "127.0.0.1",
        9876,
        False,
        False,
    )
    assert (default.broker_lease_seconds, default.client_expiry_seconds, default.default_gray_switch) == (
        120,
        60,
        True,
    )


def test_outside_dev_mode_no_tokens_or_the_dev_token_refuse_to_serve() -> None:
    with pytest.raises(InsecureConfigError, match="no admin tokens"):
        settings().token_actors()
    with pytest.raises(InsecureConfigError, match="dev mode"):
        settings(admin_tokens="ops=dev-token").token_actors()


def test_dev_mode_adds_the_dev_token_named_dev() -> None:
    assert settings(dev_mode=True).token_actors() == {"dev-token": "dev"}
    assert settings(dev_mode=True, admin_tokens="ops=s1").token_actors() == {"s1": "ops", "dev-token": "dev"}


def test_actor_for_matches_only_a_configured_secret() -> None:
    actors = {"secret1": "ops", "secret2": "ci"}
    assert actor_for(actors, "secret2") == "ci"
    assert actor_for(actors, "secret") is None
    assert actor_for(actors, "secret1 ") is None


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://u@h:5/db", "postgresql+psycopg://u@h:5/db"),
        ("postgres://u:p%40ss@h/db", "postgresql+psycopg://u:p%40ss@h/db"),
        ("postgresql+psycopg://u@h/db", "postgresql+psycopg://u@h/db"),
        ("sqlite:///relative/ns.db", "sqlite:///relative/ns.db"),
    ],
)
def test_database_urls_are_normalized_to_the_psycopg_driver(url: str, expected: str) -> None:
    assert normalize_db_url(url) == expected


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("nonsense", "not a database URL"),
        ("mysql://u@h/db", "unsupported database"),
        ("postgresql+asyncpg://u@h/db", "driver"),
        ("postgresql://u@h", "database name"),
        ("sqlite://", "in-memory"),
    ],
)
def test_unusable_database_urls_are_refused(url: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        settings(db_url=url)


@pytest.mark.parametrize("field", [{"port": 70000}, {"broker_lease_seconds": 0}, {"log_level": "LOUD"}])
def test_out_of_range_settings_are_refused(field: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        settings(**field)
