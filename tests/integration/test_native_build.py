"""The install builds the compiled hot path and the process uses it; ``GRAYMQ_PURE=1`` turns it off, and a
missing extension falls back to the pure path with one warning line naming why.

The wheel holding the extension is checked by test_packaging.py's wheel test."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration

PROBE = ("from graymq.protocol import frame, native\n"
         "print(native.REASON)\n"
         "print(frame.encode_frame.__module__)\n")
BLOCK_EXTENSION = ("import sys\n"
                   "class Block:\n"
                   "    def find_spec(self, name, path=None, target=None):\n"
                   "        if name == 'graymq.protocol._speedups':\n"
                   "            raise ImportError('blocked by the test')\n"
                   "sys.meta_path.insert(0, Block())\n")


def _probe(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "GRAYMQ_PURE"} | env
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd="/",
                          env=environment)


def test_the_installed_package_runs_the_compiled_path() -> None:
    result = _probe(PROBE)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["compiled (graymq.protocol._speedups)", "graymq.protocol._speedups"]
    assert result.stderr == ""


def test_graymq_pure_selects_the_pure_path_without_a_warning() -> None:
    result = _probe(PROBE, GRAYMQ_PURE="1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["pure Python (GRAYMQ_PURE is set)", "graymq.protocol.frame"]
    assert result.stderr == ""


def test_a_missing_extension_falls_back_with_one_warning_line() -> None:
    result = _probe(BLOCK_EXTENSION + PROBE)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1] == "graymq.protocol.frame"
    [line] = result.stderr.splitlines()
    assert "graymq.protocol._speedups is not available (blocked by the test)" in line
