"""`graymq gray promote` on a group with no gray client says there was nothing to promote in one line (exit 0, no
operation recorded, `--json` keeps its keys and gains ``nothing_to_promote`` and ``recorded``); on an unknown group
it says so as `gray status` does. On real processes."""

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
    assert text.stdout == "nothing to promote: G_IDLE has no gray client and no gray rule (no operation recorded)\n", \
        text.stdout + text.stderr
    assert "promote #" not in text.stderr, text.stderr  # no operation started, no drain progress
    report = json.loads(graymq(ns, "gray", "promote", "G_IDLE", "--json").stdout)
    assert (report["state"], report["nothing_to_promote"], report["recorded"]) == ("SUCCEEDED", True, False)
    assert {"operation_id", "consumers_flipped", "producers_flipped", "gray_backlog"} <= set(report)
    assert json.loads(graymq(ns, "gray", "history", "G_IDLE", "--json").stdout) == []


def test_promote_of_an_unknown_group_says_so_in_one_line(cluster) -> None:
    result = graymq(cluster.ns_url, "gray", "promote", "NO_SUCH_GROUP", check=False)
    status = graymq(cluster.ns_url, "gray", "status", "NO_SUCH_GROUP", check=False)
    assert result.returncode == status.returncode == 1
    assert result.stderr == "graymq gray: group NO_SUCH_GROUP is not known to the name server\n", result.stderr
    assert "/v1/" not in result.stderr
