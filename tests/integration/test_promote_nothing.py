"""`graymq gray promote` on a group with no gray client says there was nothing to promote (exit 0; the operation
is recorded as before and `--json` gains ``nothing_to_promote``), on real processes."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import gray_status, graymq, start_consumer, wait_for

pytestmark = pytest.mark.integration


def test_promote_of_a_group_without_a_gray_client_says_nothing_to_promote(cluster, graymq_process) -> None:
    cluster.add_broker("broker-a")
    cluster.create_topic("T_IDLE", 4, 2)
    ns = cluster.ns_url
    start_consumer(graymq_process, ns, "G_IDLE", "v1", "T_IDLE")
    wait_for(lambda: bool(gray_status(ns, "G_IDLE")["clients"]), 30, "v1 registered")

    text = graymq(ns, "gray", "promote", "G_IDLE")
    assert "SUCCEEDED" in text.stdout and "nothing to promote: G_IDLE has no gray client and no gray rule" \
        in text.stdout, text.stdout
    report = json.loads(graymq(ns, "gray", "promote", "G_IDLE", "--json").stdout)
    assert (report["state"], report["nothing_to_promote"]) == ("SUCCEEDED", True)
    assert {"operation_id", "consumers_flipped", "producers_flipped", "gray_backlog"} <= set(report)
