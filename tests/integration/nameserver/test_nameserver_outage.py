"""PostgreSQL going away: JSON 503s instead of crashes or hangs, and recovery without a restart."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from nameserver_testkit import ADMIN_TOKENS, OPS, client_heartbeat, wait_until

from graymq.devkit.processes import GraymqProcess

pytestmark = pytest.mark.integration


@contextmanager
def postgres_stopped(postgres: Any) -> Iterator[None]:
    """Stop the session's PostgreSQL; it is running again afterwards even when the test fails."""
    postgres.stop()
    try:
        yield
    finally:
        postgres.start()


def assert_unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    body = response.json()
    assert body["error"] == "database unavailable"
    assert isinstance(body["detail"], str) and body["detail"]


def test_database_outage_answers_503_and_recovers_without_restart(
    graymq_process: Callable[..., GraymqProcess], postgres: Any, db_url: str
) -> None:
    proc = graymq_process(
        "nameserver", "--port", "0", "--db", db_url, env={"GRAYMQ_ADMIN_TOKENS": ADMIN_TOKENS}
    )
    assert proc.ready_info is not None
    # The timeout bounds every call: a request must not hang on the dead database.
    with httpx.Client(base_url=proc.ready_info["url"], headers=OPS, timeout=15) as api:
        client_heartbeat(api, "outage_group", "c1")
        assert api.put("/v1/groups/outage_group/clients/c1/flag", json={"gray": True}, headers=OPS).is_success

        with postgres_stopped(postgres):
            assert_unavailable(api.get("/v1/groups/outage_group/clients"))
            assert_unavailable(
                api.post(
                    "/v1/clients/heartbeat",
                    json={"group": "outage_group", "client_id": "c1", "role": "consumer"},
                )
            )
            assert_unavailable(
                api.put("/v1/groups/outage_group/clients/c1/flag", json={"gray": False}, headers=OPS)
            )
            assert_unavailable(api.get("/v1/topics/T/route"))
            assert_unavailable(api.get("/readyz"))
            assert api.get("/healthz").status_code == 200
            metrics = api.get("/metrics")
            assert metrics.status_code == 200
            errors = next(
                line for line in metrics.text.splitlines() if line.startswith("graymq_nameserver_db_errors")
            )
            assert float(errors.split()[-1]) >= 6
            assert proc.proc.poll() is None

        wait_until(lambda: api.get("/readyz").status_code == 200, timeout=30, what="readiness after restart")
        (row,) = api.get("/v1/groups/outage_group/clients").json()["clients"]
        assert row["explicit_gray"] is True  # nothing lost, nothing half-written by the failed flip
        assert client_heartbeat(api, "outage_group", "c1")["desired_gray"] is True
    assert proc.terminate() == 0
