"""TLS on real processes: a name server serving HTTPS (PostgreSQL), a broker whose port speaks TLS only and
registers over https, and the `graymq` CLI trusting them through GRAYMQ_TLS_CA; clients that lack the CA or
speak plain TCP get a one-line error, and the broker keeps serving after them."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from graymq.devkit.certs import TlsFiles, make_tls_files
from graymq.devkit.processes import GraymqProcess
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.broker_client import split_address
from graymq.protocol.connection import Connection
from graymq.protocol.errors import ConfigError
from graymq.protocol.frame import encode_frame
from graymq.protocol.remoting import request_envelope
from graymq.protocol.tls import client_context
from tests.support.cli import wait_for
from tests.support.cluster import FAST_ENV
from tests.support.metrics import scrape

pytestmark = pytest.mark.integration

TOPIC = "TLS_ORDERS"
BROKER = "broker-tls"


@dataclass
class TlsCluster:
    files: TlsFiles
    nameserver: GraymqProcess  # HTTPS
    plain_nameserver: GraymqProcess  # plain HTTP on the same database: reaches the broker's route without TLS
    broker: GraymqProcess

    @property
    def url(self) -> str:
        return str(self.nameserver.ready_info["url"]) if self.nameserver.ready_info else ""

    @property
    def plain_url(self) -> str:
        return str(self.plain_nameserver.ready_info["url"]) if self.plain_nameserver.ready_info else ""


def run_cli(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``graymq ARGS`` with exactly the TLS variables in ``env`` (the test runner's own are dropped)."""
    base = {k: v for k, v in os.environ.items() if k not in ("GRAYMQ_TLS", "GRAYMQ_TLS_CA")}
    return subprocess.run([sys.executable, "-m", "graymq.gray_controller.cli", *args], capture_output=True,
                          text=True, timeout=timeout, env={**base, "GRAYMQ_ADMIN_TOKEN": "dev-token", **env})


def error_line(result: subprocess.CompletedProcess[str], prefix: str) -> str:
    """The command's error: the one stderr line starting with ``prefix`` (log lines may surround it); the
    command failed and printed no traceback."""
    assert result.returncode != 0, result
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith(prefix)]
    assert len(lines) == 1, f"no single line starting with {prefix!r} in stderr:\n{result.stderr}"
    return lines[0]


@pytest.fixture(scope="module")
def tls_cluster(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsCluster]:
    """A TLS name server (certificate from GRAYMQ_TLS_CERT/KEY), a plain one on the same database, and a TLS
    broker (``--tls-cert/--tls-key``) registered over https with GRAYMQ_TLS_CA; topic TLS_ORDERS."""
    root = tmp_path_factory.mktemp("tls-cluster")
    files = make_tls_files(root / "certs")
    started: list[GraymqProcess] = []

    def start(*args: str, env: dict[str, str]) -> GraymqProcess:
        proc = GraymqProcess(args, env={**FAST_ENV, **env}, cwd=root)
        started.append(proc)
        proc.wait_ready(60)
        return proc

    try:
        nameserver = start("nameserver", "--port", "0", "--db", pg_url, "--migrate", "--dev",
                           env={"GRAYMQ_TLS_CERT": str(files.cert), "GRAYMQ_TLS_KEY": str(files.key)})
        plain = start("nameserver", "--port", "0", "--db", pg_url, "--dev", env={})
        broker = start("broker", "--name", BROKER, "--port", "0", "--store", str(root / "store"),
                       "--nameserver", str(nameserver.wait_ready()["url"]),
                       "--tls-cert", str(files.cert), "--tls-key", str(files.key),
                       env={"GRAYMQ_TLS_CA": str(files.ca), "GRAYMQ_BROKER_METRICS_PORT": "0"})
        cluster = TlsCluster(files, nameserver, plain, broker)
        create_topic(cluster, TOPIC)
        yield cluster
    finally:
        for proc in reversed(started):
            proc.terminate()


def create_topic(cluster: TlsCluster, topic: str) -> None:
    """``graymq topic create`` over https, trusting the CA; it returns once the broker serves the topic."""
    created = run_cli("topic", "create", topic, "--queues", "4", "--gray-queues", "0", "--nameserver", cluster.url,
                      env={"GRAYMQ_TLS_CA": str(cluster.files.ca)})
    assert created.returncode == 0, created.stderr
    assert BROKER in created.stdout


def produce_and_consume(cluster: TlsCluster, topic: str, bodies: list[str]) -> list[str]:
    """``graymq produce`` each body, then ``graymq consume`` them back from the first, both trusting the CA;
    the bodies read."""
    trust = {"GRAYMQ_TLS_CA": str(cluster.files.ca)}
    for body in bodies:
        sent = run_cli("produce", topic, "--body", body, "--json", "--nameserver", cluster.url, env=trust)
        assert sent.returncode == 0, sent.stderr
        assert '"status": "SEND_OK"' in sent.stdout and f'"broker": "{BROKER}"' in sent.stdout
    consumed = run_cli("consume", topic, "--group", f"{topic}-readers", "--from", "first", "--max", str(len(bodies)),
                       "--idle-exit", "60", "--json", "--nameserver", cluster.url, env=trust)
    assert consumed.returncode == 0, consumed.stderr
    return [json.loads(line)["body"] for line in consumed.stdout.splitlines() if line.startswith("{")]


def test_name_server_serves_https_only_and_announces_an_https_url(tls_cluster: TlsCluster) -> None:
    assert tls_cluster.url.startswith("https://127.0.0.1:")
    assert "over TLS" in tls_cluster.nameserver.output
    assert tls_cluster.plain_url.startswith("http://") and "over TLS" not in tls_cluster.plain_nameserver.output
    ok = httpx.get(f"{tls_cluster.url}/healthz", verify=client_context(tls_cluster.files.ca), timeout=10)
    assert ok.status_code == 200
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"{tls_cluster.url}/healthz", verify=client_context(), timeout=10)
    with pytest.raises(httpx.HTTPError):  # plain HTTP on the HTTPS port gets no answer
        httpx.get(tls_cluster.url.replace("https://", "http://") + "/healthz", timeout=10)


def test_broker_serves_tls_and_registers_with_the_name_server_over_https(tls_cluster: TlsCluster) -> None:
    assert "over TLS" in tls_cluster.broker.output
    assert f"principals from name server {tls_cluster.url}" in tls_cluster.broker.output
    brokers = httpx.get(f"{tls_cluster.url}/v1/brokers", verify=client_context(tls_cluster.files.ca), timeout=10)
    assert [b["broker_name"] for b in brokers.json()] == [BROKER]


def test_topic_create_produce_and_consume_go_through_over_tls(tls_cluster: TlsCluster) -> None:
    bodies = [f"paid-{i}" for i in range(3)]
    assert sorted(produce_and_consume(tls_cluster, TOPIC, bodies)) == bodies


def test_a_client_without_the_ca_fails_certificate_verification(tls_cluster: TlsCluster) -> None:
    system_store = {"GRAYMQ_TLS": "true"}
    created = run_cli("topic", "create", "TLS_OTHER", "--queues", "2", "--gray-queues", "0",
                      "--nameserver", tls_cluster.url, env=system_store)
    line = error_line(created, "graymq topic: ")
    assert line.startswith("graymq topic: PUT /v1/topics/TLS_OTHER: no name server's TLS certificate verifies")
    assert "CERTIFICATE_VERIFY_FAILED" in line and created.returncode == 2  # a configuration to fix
    # The name server's certificate stops `produce` first...
    sent = run_cli("produce", TOPIC, "--body", "x", "--nameserver", tls_cluster.url, env=system_store)
    assert "CERTIFICATE_VERIFY_FAILED" in error_line(sent, "graymq produce: ")
    # ...and the broker's does through a name server reached without TLS.
    sent = run_cli("produce", TOPIC, "--body", "x", "--nameserver", tls_cluster.plain_url, env=system_store)
    assert error_line(sent, f"FAILED {TOPIC}: ") == (
        f"FAILED {TOPIC}: TLS with {tls_cluster.broker.address} failed: certificate verify failed: unable to get "
        "local issuer certificate (the CA is GRAYMQ_TLS_CA, else the system's)"
    )
    assert sent.returncode == 1
    # a consumer stops too: no retry can make the certificate verify
    for url in (tls_cluster.url, tls_cluster.plain_url):
        consumed = run_cli("consume", TOPIC, "--group", "untrusting", "--idle-exit", "30", "--nameserver", url,
                           env=system_store)
        assert consumed.returncode != 0 and "certificate verif" in consumed.stderr, consumed.stderr


def test_a_plain_tcp_client_against_the_tls_broker_gets_a_clear_error(tls_cluster: TlsCluster) -> None:
    plain = {"GRAYMQ_TLS": "false", "GRAYMQ_TLS_CA": str(tls_cluster.files.ca)}  # https to the name server only
    sent = run_cli("produce", TOPIC, "--body", "x", "--nameserver", tls_cluster.url, env=plain)
    line = error_line(sent, f"FAILED {TOPIC}: ")
    assert line.startswith(f"FAILED {TOPIC}: connection to {tls_cluster.broker.address} closed")
    assert sent.returncode == 1


def closed_without_answer(conn: socket.socket) -> bool:
    """The peer closed ``conn`` (cleanly or with a reset) and sent nothing first."""
    try:
        return conn.recv(4096) == b""
    except ConnectionResetError:
        return True


async def graymq_client_without_the_ca(host: str, port: int) -> None:
    """graymq's own client rejecting the broker's certificate: it hangs up without a TLS alert."""
    with pytest.raises(ConfigError, match="certificate verify failed"):
        await Connection.open(host, port, tls=client_context(), timeout=10)


def test_the_broker_keeps_serving_after_bad_connections(tls_cluster: TlsCluster) -> None:
    create_topic(tls_cluster, "TLS_AFTER_BAD")
    host, port = split_address(tls_cluster.broker.address)
    frame = encode_frame(1, request_envelope(pb.HEARTBEAT, pb.HeartbeatRequest()))
    metrics = f"http://{tls_cluster.broker.ready_info['metrics']}/metrics"  # type: ignore[index]
    failed_before = scrape(metrics).value("graymq_broker_tls_handshake_failures_total") or 0
    for _ in range(3):
        with socket.create_connection((host, port), timeout=10) as raw:  # a plain frame on the TLS port
            raw.sendall(frame)
            assert closed_without_answer(raw)
        with socket.create_connection((host, port), timeout=10):  # connect, say nothing, leave
            pass
        with socket.create_connection((host, port), timeout=10) as raw, pytest.raises(ssl.SSLCertVerificationError):
            client_context().wrap_socket(raw, server_hostname=host)  # a client that does not trust the CA
        asyncio.run(graymq_client_without_the_ca(host, port))
        trusted = client_context(tls_cluster.files.ca)
        with socket.create_connection((host, port), timeout=10) as raw, \
                trusted.wrap_socket(raw, server_hostname=host) as tls:  # TLS, then garbage in place of a frame
            tls.sendall(b"GET / HTTP/1.1\r\n\r\n")
            assert closed_without_answer(tls)
    assert tls_cluster.broker.proc.poll() is None
    # every failed handshake is counted (a connection that says nothing is no handshake); the log names each
    # reason once in 30 s, not once per connection
    def failed() -> float:
        return (scrape(metrics).value("graymq_broker_tls_handshake_failures_total") or 0) - failed_before

    wait_for(lambda: failed() >= 9, 10, "the plain frames and the three kinds of untrusting client counted")
    warned = [line for line in tls_cluster.broker.output.splitlines() if "TLS handshake on the broker port" in line]
    assert any("WRONG_VERSION_NUMBER (a client speaking plain TCP" in line for line in warned), warned
    assert any("TLSV1_ALERT_UNKNOWN_CA (a client that does not trust" in line for line in warned), warned
    assert any("LEFT_DURING_HANDSHAKE (the client hung up" in line for line in warned), warned
    assert all(" WARNING " in line for line in warned) and len(warned) <= 4
    bodies = ["after-bad-1", "after-bad-2"]
    assert sorted(produce_and_consume(tls_cluster, "TLS_AFTER_BAD", bodies)) == bodies


def test_name_server_tls_flags_go_together(tmp_path: Path) -> None:
    files = make_tls_files(tmp_path / "certs")
    db = f"sqlite:///{tmp_path / 'ns.db'}"
    for args, env in ((["--tls-cert", str(files.cert)], {}), ([], {"GRAYMQ_TLS_KEY": str(files.key)})):
        result = run_cli("nameserver", "--port", "0", "--db", db, "--dev", *args, env=env, timeout=60)
        assert result.returncode == 2
        assert result.stderr.strip() == (
            "graymq nameserver: invalid configuration: --tls-cert (GRAYMQ_TLS_CERT) and --tls-key (GRAYMQ_TLS_KEY) "
            "go together: give both or neither"
        )


def test_name_server_refuses_a_certificate_or_key_that_does_not_load(tmp_path: Path) -> None:
    files = make_tls_files(tmp_path / "certs")
    db = f"sqlite:///{tmp_path / 'ns.db'}"
    cases = [
        (files.cert, files.ca, "ca.crt: [SSL]"),  # a certificate where the key should be
        (tmp_path / "missing.crt", files.key, "No such file or directory"),
    ]
    for cert, key, detail in cases:
        result = run_cli("nameserver", "--port", "0", "--db", db, "--dev", "--tls-cert", str(cert),
                         "--tls-key", str(key), env={}, timeout=60)
        assert result.returncode == 2, result.stderr
        message = result.stderr.strip()
        assert message.startswith(f"graymq nameserver: cannot load TLS certificate {cert} with key {key}: ")
        assert detail in message and "\n" not in message
