"""An `http://` URL to a name server that speaks TLS gets a hint to use `https://` instead of a bare
'Server disconnected', on a real TLS name server (SQLite)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from graymq.devkit.certs import make_tls_files

pytestmark = pytest.mark.integration


def test_a_plain_http_url_to_a_tls_name_server_is_told_to_use_https(graymq_process, tmp_path: Path) -> None:
    files = make_tls_files(tmp_path / "certs")
    nameserver = graymq_process("nameserver", "--port", "0", "--db", f"sqlite:///{tmp_path}/ns.db", "--migrate",
                                "--dev", env={"GRAYMQ_TLS_CERT": str(files.cert), "GRAYMQ_TLS_KEY": str(files.key)})
    https_url = str(nameserver.ready_info["url"])
    http_url = https_url.replace("https://", "http://")
    result = subprocess.run([sys.executable, "-m", "graymq.gray_controller.cli", "topic", "list", "--nameserver",
                             http_url], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "GRAYMQ_ADMIN_TOKEN": "dev-token"})
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"(a name server speaking TLS? use {https_url})" in result.stderr, result.stderr
