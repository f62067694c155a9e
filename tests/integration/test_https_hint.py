"""A name-server URL that reaches the wrong server gets a hint naming what it reached: a name server speaking TLS
(use `https://`), or a broker's port (not a name server); a refused connection is said once, not per round. On a
real TLS name server (SQLite) and a real broker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from graymq.devkit.certs import make_tls_files
from graymq.devkit.ports import free_port

pytestmark = pytest.mark.integration


def topic_list(url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "graymq.gray_controller.cli", "topic", "list", "--nameserver", url],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "GRAYMQ_ADMIN_TOKEN": "dev-token"})


def test_a_plain_http_url_to_a_tls_name_server_is_told_to_use_https(graymq_process, tmp_path: Path) -> None:
    files = make_tls_files(tmp_path / "certs")
    nameserver = graymq_process("nameserver", "--port", "0", "--db", f"sqlite:///{tmp_path}/ns.db", "--migrate",
                                "--dev", env={"GRAYMQ_TLS_CERT": str(files.cert), "GRAYMQ_TLS_KEY": str(files.key)})
    https_url = str(nameserver.ready_info["url"])
    result = topic_list(https_url.replace("https://", "http://"))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"(a name server speaking TLS: use {https_url})" in result.stderr, result.stderr


def test_a_broker_port_given_as_name_server_is_told_it_is_no_name_server(cluster) -> None:
    broker = cluster.add_broker("broker-a")
    host, port = broker.address.rsplit(":", 1)
    result = topic_list(f"http://{host}:{port}")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"({host}:{port} is not a name server: a broker's port?" in result.stderr, result.stderr
    assert "speaking TLS" not in result.stderr, result.stderr


def test_a_refused_connection_names_its_cause_once() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = topic_list(url)
    assert result.returncode == 1 and result.stderr.count("ConnectError") == 1, result.stderr
