"""The latency harness (graymq.bench.latency) waits for its consumer process to subscribe, but a consumer that
fails or dies first is reported at once with what happened, not as a bare "not ready" after the whole wait."""

from __future__ import annotations

import pytest

from graymq.bench import latency

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("fail", "reported"), [
    ("raise", "latency consumer not ready: ConnectionRefusedError: name server refused the consumer"),
    ("die", "latency consumer not ready: exited with code 3"),
])
def test_a_consumer_that_fails_before_it_is_ready_is_reported_with_its_cause(
        monkeypatch: pytest.MonkeyPatch, fail: str, reported: str) -> None:
    monkeypatch.setattr(latency, "READY_TIMEOUT_S", 600.0)  # a hang here would show as the test's own timeout
    with pytest.raises(RuntimeError, match=reported):
        latency.measure("tests.support.latency_systems", {"fail": fail}, rate=10, duration_s=1)
