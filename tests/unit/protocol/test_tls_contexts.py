"""protocol/tls.py: server and client contexts (handshakes over memory BIOs) and the env rule for TLS to brokers."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from graymq.devkit.certs import TlsFiles, make_tls_files
from graymq.protocol.errors import ConfigError
from graymq.protocol.tls import broker_tls, ca_file, client_context, https_verify, server_context

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture(autouse=True)
def _no_tls_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GRAYMQ_TLS", raising=False)
    monkeypatch.delenv("GRAYMQ_TLS_CA", raising=False)


def handshake(server: ssl.SSLContext, client: ssl.SSLContext, server_hostname: str) -> str:
    """A full TLS handshake through memory BIOs; returns the version agreed (the client's errors propagate)."""
    client_in, client_out, server_in, server_out = (ssl.MemoryBIO() for _ in range(4))
    client_end = client.wrap_bio(client_in, client_out, server_hostname=server_hostname)
    server_end = server.wrap_bio(server_in, server_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(10):
        for name, end in (("client", client_end), ("server", server_end)):
            if not done[name]:
                try:
                    end.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        server_in.write(client_out.read())
        client_in.write(server_out.read())
        if all(done.values()):
            return str(client_end.version())
    raise AssertionError("handshake did not finish")


@pytest.mark.parametrize("server_hostname", ["127.0.0.1", "localhost"])
def test_a_client_with_the_ca_verifies_the_server_by_ip_and_name(tls_files: TlsFiles, server_hostname: str) -> None:
    version = handshake(server_context(tls_files.cert, tls_files.key), client_context(tls_files.ca), server_hostname)
    assert version in ("TLSv1.2", "TLSv1.3")


def test_the_ca_comes_from_graymq_tls_ca(tls_files: TlsFiles, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAYMQ_TLS_CA", str(tls_files.ca))
    assert ca_file() == str(tls_files.ca)
    handshake(server_context(tls_files.cert, tls_files.key), client_context(), "127.0.0.1")


def test_a_client_on_the_system_store_refuses_a_private_ca(tls_files: TlsFiles) -> None:
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
        handshake(server_context(tls_files.cert, tls_files.key), client_context(), "127.0.0.1")


def test_a_certificate_for_other_names_is_refused(tls_files: TlsFiles) -> None:
    with pytest.raises(ssl.SSLCertVerificationError, match="mismatch|match"):
        handshake(server_context(tls_files.cert, tls_files.key), client_context(tls_files.ca), "broker.example.com")


def test_another_ca_does_not_verify_the_server(tls_files: TlsFiles, tmp_path: Path) -> None:
    other = make_tls_files(tmp_path / "other", ca_name="another CA")
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(server_context(tls_files.cert, tls_files.key), client_context(other.ca), "127.0.0.1")


def test_both_sides_refuse_anything_older_than_tls_1_2(tls_files: TlsFiles) -> None:
    assert server_context(tls_files.cert, tls_files.key).minimum_version == ssl.TLSVersion.TLSv1_2
    assert client_context(tls_files.ca).minimum_version == ssl.TLSVersion.TLSv1_2


def test_a_certificate_and_key_that_do_not_load_are_a_config_error_naming_them(
    tls_files: TlsFiles, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match=r"cannot load TLS certificate .*server\.crt with key .*ca\.crt"):
        server_context(tls_files.cert, tls_files.ca)  # a certificate where the key should be
    other = make_tls_files(tmp_path / "other")
    with pytest.raises(ConfigError, match="cannot load TLS certificate"):
        server_context(tls_files.cert, other.key)  # a key of another certificate
    with pytest.raises(ConfigError, match="No such file"):
        server_context(tmp_path / "missing.crt", tls_files.key)


def test_a_ca_file_that_does_not_load_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot load the TLS CA file"):
        client_context(tmp_path / "missing.pem")
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    with pytest.raises(ConfigError, match="garbage.pem"):
        client_context(garbage)


@pytest.mark.parametrize(
    ("tls", "ca", "expected"),
    [
        (None, False, None),  # nothing configured: plain TCP
        (None, True, "tls"),  # a CA alone turns TLS on
        ("true", False, "tls"),  # system store
        ("TRUE", True, "tls"),
        ("false", True, None),  # plain TCP wins over a CA
        ("0", False, None),
        ("", True, None),
    ],
)
def test_clients_speak_tls_to_brokers_when_graymq_tls_says_so_or_a_ca_is_set(
    tls_files: TlsFiles, monkeypatch: pytest.MonkeyPatch, tls: str | None, ca: bool, expected: str | None
) -> None:
    if tls is not None:
        monkeypatch.setenv("GRAYMQ_TLS", tls)
    if ca:
        monkeypatch.setenv("GRAYMQ_TLS_CA", str(tls_files.ca))
    context = broker_tls()
    assert (context is not None) == (expected == "tls")
    if context is not None:
        assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname


def test_an_explicit_choice_overrides_the_environment(tls_files: TlsFiles, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAYMQ_TLS_CA", str(tls_files.ca))
    assert broker_tls(False) is None
    monkeypatch.setenv("GRAYMQ_TLS", "false")
    assert isinstance(broker_tls(True), ssl.SSLContext)


def test_a_graymq_tls_that_is_not_a_boolean_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAYMQ_TLS", "maybe")
    with pytest.raises(ConfigError, match="GRAYMQ_TLS='maybe'"):
        broker_tls()


def test_https_is_verified_with_the_ca_file_or_else_the_system_store(
    tls_files: TlsFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert https_verify() is True
    monkeypatch.setenv("GRAYMQ_TLS_CA", "   ")
    assert https_verify() is True and ca_file() is None
    monkeypatch.setenv("GRAYMQ_TLS_CA", str(tls_files.ca))
    verify = https_verify()
    assert isinstance(verify, ssl.SSLContext)
    handshake(server_context(tls_files.cert, tls_files.key), verify, "localhost")
