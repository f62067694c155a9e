"""`graymq up` tells a person how to reach the cluster, and stays quiet about it for a script that owns the cluster
and asked for warnings only (`make demo`, which shuts the cluster down before it ends)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(("level", "hinted"), [("INFO", True), ("WARNING", False)])
def test_the_export_hint_follows_the_log_level(graymq_process, tmp_path, level: str, hinted: bool) -> None:
    up = graymq_process("up", "--data", str(tmp_path / "data"), "--nameserver-port", "0", "--broker-port", "0",
                        env={"GRAYMQ_LOG_LEVEL": level}, timeout=90)
    assert up.terminate() == 0
    assert ("export GRAYMQ_NAMESERVER=" in up.output) is hinted, up.output
