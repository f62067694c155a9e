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


def watches(api: TestClient, known: dict[str, dict[str, Any]], timeout_s: float, **extra: Any
            ) -> tuple[dict[str, Any], list[str]]:
    """One batched watch of ``known``'s clients (group ``"<group>/<client>"``): its answer, and the reads of clients
    it made."""
    engine = api.app.state.engine  # type: ignore[attr-defined]
    body = {"watches": [{"group": key.split("/")[0], "client_id": key.split("/")[1], "role": "consumer",
                         "known": state} for key, state in known.items()], "timeout_s": timeout_s, **extra}
    with recorded_statements(engine) as statements:
        answer = api.post("/v1/clients/watches", json=body)
    assert answer.status_code == 200, answer.text
    return answer.json(), [s for s in statements if s.startswith("SELECT") and "FROM clients" in s]


def test_a_poll_sent_with_the_versions_it_was_answered_with_reads_nothing_until_its_group_changes(
        api: TestClient) -> None:
    """A process's polls go again after every answer and timeout, each reading all its clients' views first: with
    ``since``, none is read while every watched group's version is current, and unchanged views are 304."""
    known = {}
    for key in ("since_a/a0", "since_a/a1", "since_b/b0"):
        beat = client_heartbeat(api, *key.split("/"), labels={"version": "v2"})
        known[key] = {k: beat[k] for k in ("desired_gray", "gray_switch", "orphan_policy")}
    full, _ = watches(api, known, 0)
    assert "versions" not in full and all(r["status_code"] == 200 and r["answer"] for r in full["results"])
    first, reads = watches(api, known, 0, since={})
    assert reads and [r["status_code"] for r in first["results"]] == [304] * 3
    versions = first["versions"]
    assert set(versions) == {"since_a", "since_b"}
    again, reads = watches(api, known, 0.2, since=versions)
    assert (reads, [r["status_code"] for r in again["results"]], again["versions"]) == ([], [304] * 3, versions)

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pending = pool.submit(watches, api, known, WATCH_S, since=versions)
        wait_until(lambda: open_watches(api) >= 1, what="the poll waiting")
        added = api.post("/v1/groups/since_a/rules", json={"selector": {"version": "v2"}, "gray": True}, headers=OPS)
        assert added.is_success, added.text
        woken, reads = pending.result(WATCH_S)
    assert [r["status_code"] for r in woken["results"]] == [200, 200, 304]
    assert [r["answer"]["desired_gray"] for r in woken["results"][:2]] == [True, True]
    assert woken["versions"]["since_b"] == versions["since_b"] != "" and woken["versions"]["since_a"] != versions[
        "since_a"]
    assert reads and not any("clients.client_id) IN" in s for s in reads)  # the woken group's shared read alone

    stale, reads = watches(api, known, WATCH_S, since=versions)  # since a version that is not current: read at once
    assert reads and [r["status_code"] for r in stale["results"]] == [200, 200, 304]
