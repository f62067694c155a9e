"""A change of a group wakes all its watches, and they share one read of the group: the reads it costs do not
grow with the number of watches (a client leaving a group of 500 made 500 reads of four statements each)."""

from __future__ import annotations

import concurrent.futures
from typing import Any

import pytest
from fastapi.testclient import TestClient
from nameserver_testkit import OPS, client_heartbeat, wait_until
from test_nameserver_statements import recorded_statements

pytestmark = pytest.mark.integration

WATCH_S = 60.0


def open_watches(api: TestClient) -> float:
    metrics = api.get("/metrics").text
    return sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
               if line.startswith("graymq_nameserver_open_watches"))


def woken_watches(api: TestClient, group: str, watches: int) -> tuple[list[dict[str, Any]], list[str]]:
    """``watches`` clients watch ``group`` until a rule makes them gray: their answers, and the reads of the
    group's clients made from their first reads to their answers."""
    known = {}
    for i in range(watches):
        beat = client_heartbeat(api, group, f"c{i}", labels={"version": "v2"})
        known[f"c{i}"] = {k: beat[k] for k in ("desired_gray", "gray_switch", "orphan_policy")}
    engine = api.app.state.engine  # type: ignore[attr-defined]
    with recorded_statements(engine) as statements, concurrent.futures.ThreadPoolExecutor(watches) as pool:
        pending = [pool.submit(api.post, "/v1/clients/watch", json={
            "group": group, "client_id": cid, "role": "consumer", "known": state, "timeout_s": WATCH_S})
            for cid, state in known.items()]
        wait_until(lambda: open_watches(api) >= watches, what="every watch waiting")
        added = api.post(f"/v1/groups/{group}/rules", json={"selector": {"version": "v2"}, "gray": True},
                         headers=OPS)
        assert added.is_success, added.text
        answers = [p.result(WATCH_S) for p in pending]
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
    reads = [s for s in statements if s.startswith("SELECT") and "FROM clients" in s and "JOIN" not in s]
    return [a.json() for a in answers], reads  # not the metrics' counts (joined with groups)


def test_the_watches_a_change_wakes_share_one_read_of_the_group(api: TestClient) -> None:
    for watches in (2, 8):
        answers, reads = woken_watches(api, f"watch_reads_{watches}", watches)
        assert [a["desired_gray"] for a in answers] == [True] * watches
        own = [s for s in reads if "clients.client_id) IN" in s]  # the rows of the clients a read names
        shared = [s for s in reads if "clients.last_seen >" in s and "count(" not in s]  # the group's live clients
        assert len(own) == watches  # each watch's first read, and no other
        assert 1 <= len(shared) <= 2, shared  # one per wake-up (the change's own, and its NOTIFY's)
