"""Every number option of ``graymq`` is checked against its range before any request: NaN, an infinity or an absurd
duration is one line naming the option and the range, exit 2 (as the CLI's other argument errors)."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

pytestmark = pytest.mark.integration
NOWHERE = "http://127.0.0.1:9"  # nothing listens: a request would fail with exit 1, not 2
ROLLOUT = ["gray", "rollout", "G", "--steps", "5,50"]
SECONDS_ABOVE_0 = "must be > 0 and <= 604800 s"

CASES = [
    ([*ROLLOUT, "--step-seconds", "inf"], "--step-seconds must be > 0 and <= 86400 s, got inf"),
    ([*ROLLOUT, "--step-seconds", "1e308"], "--step-seconds must be > 0 and <= 86400 s, got 1e+308"),
    ([*ROLLOUT, "--step-seconds", "nan"], "--step-seconds must be > 0 and <= 86400 s, got nan"),
    ([*ROLLOUT, "--step-seconds", "1", "--timeout", "nan"], f"--timeout {SECONDS_ABOVE_0}, got nan"),
    ([*ROLLOUT, "--step-seconds", "1", "--timeout", "1e9"], f"--timeout {SECONDS_ABOVE_0}, got 1e+09"),
    ([*ROLLOUT, "--step-seconds", "1", "--wait-for-gray", "inf"], "--wait-for-gray must be between 0 and 604800 s, "
                                                                  "got inf"),
    ([*ROLLOUT, "--step-seconds", "1", "--max-p99-ms", "inf"], "--max-p99-ms must be > 0 and <= 8.64e+07, got inf"),
    ([*ROLLOUT, "--step-seconds", "1", "--max-failure-rate", "nan"], "--max-failure-rate must be between 0 and 100, "
                                                                     "got nan"),
    ([*ROLLOUT, "--step-seconds", "1", "--failure-margin", "inf"], "--failure-margin must be between 0 and 100, "
                                                                   "got inf"),
    (["gray", "promote", "G", "--timeout", "inf"], f"--timeout {SECONDS_ABOVE_0}, got inf"),
    (["gray", "rollback", "G", "--timeout=-1"], f"--timeout {SECONDS_ABOVE_0}, got -1"),
    (["consume", "T", "--group", "G", "--idle-exit", "inf"], f"--idle-exit {SECONDS_ABOVE_0}, got inf"),
    (["consume", "T", "--group", "G", "--fail-rate", "nan"], "--fail-rate must be between 0 and 1, got nan"),
    (["produce", "T", "--body", "x", "--interval", "inf"], "--interval must be between 0 and 604800 s, got inf"),
    (["topic", "create", "T", "--queues", "4", "--wait", "nan"], "--wait must be between 0 and 604800 s, got nan"),
]


def graymq(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "graymq.gray_controller.cli", *argv, "--nameserver", NOWHERE],
                          capture_output=True, text=True, timeout=60)


def test_a_number_option_out_of_its_range_is_one_line_naming_it_and_the_range_exit_2() -> None:
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(graymq, [argv for argv, _ in CASES]))
    for (argv, message), result in zip(CASES, results, strict=True):
        assert (result.returncode, result.stderr, result.stdout) == (2, f"graymq {argv[0]}: {message}\n", ""), argv
