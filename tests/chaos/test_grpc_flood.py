"""The full gRPC floods (``make chaos``): 1,000 and 2,000 Telemetry streams from one principal, each under another
client id, on the broker's default budgets. Every stream has its answer (settings or ``TOO_MANY_REQUESTS``) within
60 s; another principal's gRPC and broker-port sends are all acknowledged with their p99 under 5x the quiet value;
the broker's RSS comes back within 20 % of its start. The bounded flood of ``make test`` is in
``tests/integration/grpc/test_grpc_budgets.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from graymq.broker_ext.grpc_endpoint.budgets import BudgetLimits
from tests.support.grpc_budgets import PROBES, flood_broker, measure_flood
from tests.support.trust import StartProcess

pytestmark = [pytest.mark.integration, pytest.mark.chaos]


@pytest.mark.parametrize("streams", [1000, 2000], ids=["grpc_flood/1000", "grpc_flood/2000"])
def test_a_full_flood_of_streams_from_one_principal_leaves_other_principals_served(
        graymq_process: StartProcess, fresh_pg_url: str, tmp_path: Path, streams: int) -> None:
    broker, endpoint, flooder, payments = flood_broker(graymq_process, fresh_pg_url, tmp_path / "b")
    figures = measure_flood(broker, endpoint, flooder, payments, streams)
    print(figures.report())
    figures.check_answers(BudgetLimits().client_ids_per_principal)
    for probe, (acked, flood_p99) in figures.flood.items():
        assert acked == PROBES, (probe, figures.report())
        assert flood_p99 < 5 * max(figures.quiet[probe][1], 0.005), (probe, figures.report())
    assert figures.rss_mib["after"] <= figures.rss_mib["before"] * 1.2, figures.report()
