"""Schemathesis over the name server's OpenAPI, on a real process and PostgreSQL: no input gives a 500.

Bounded by ``GRAYMQ_FUZZ_EXAMPLES`` examples per operation (default 10, seed ``GRAYMQ_FUZZ_SEED``, default 1;
``make fuzz`` runs more with a fresh seed). Calls
carry an admin token, so every operation is reached past authentication.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from graymq.devkit.processes import GraymqProcess

pytestmark = pytest.mark.integration

ADMIN = "fuzz-admin-secret"
REPO_ROOT = Path(__file__).resolve().parents[2]
SCHEMATHESIS = shutil.which("schemathesis", path=str(Path(sys.executable).parent))


@pytest.mark.skipif(SCHEMATHESIS is None, reason="schemathesis is not installed (pip install -e '.[dev]')")
def test_no_generated_request_gets_a_500(
    graymq_process: Callable[..., GraymqProcess], fresh_pg_url: str, tmp_path: Path
) -> None:
    proc = graymq_process("nameserver", "--port", "0", "--db", fresh_pg_url, "--migrate",
                          env={"GRAYMQ_DEV_MODE": "false", "GRAYMQ_ADMIN_TOKENS": f"fuzz={ADMIN}",
                               "GRAYMQ_AUTH_FAILURE_LIMIT": "1000000", "GRAYMQ_LOG_LEVEL": "WARNING"})
    assert proc.ready_info is not None
    url = str(proc.ready_info["url"])
    examples = os.environ.get("GRAYMQ_FUZZ_EXAMPLES", "10")
    seed = os.environ.get("GRAYMQ_FUZZ_SEED", "1")
    assert SCHEMATHESIS is not None
    result = subprocess.run(
        [SCHEMATHESIS, "run", f"{url}/openapi.json", "--url", url, "-H", f"Authorization: Bearer {ADMIN}",
         "--checks", "not_a_server_error", "--max-examples", examples, "--seed", seed,
         "--request-timeout", "30", "--exclude-path-regex", "/watch(es)?$"],
        capture_output=True, text=True, timeout=1800, cwd=tmp_path,
        env={**os.environ, "SCHEMATHESIS_HOOKS": "tests.fuzz.schemathesis_hooks", "PYTHONPATH": str(REPO_ROOT)},
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    print(result.stdout[-1500:])  # the run's summary, shown with -s (make fuzz)
