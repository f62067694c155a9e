"""Starting an operation from the console is idempotent per group, on a real name server process: a double click
on "start rollout" (or promote) answers the one running operation twice, one runner runs it, and that runner keeps
the rollout abortable from the console."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from threading import Barrier
from typing import Any

import httpx
import pytest
from nameserver_testkit import wait_until

from tests.support.trust import ADMIN, StartProcess, bearer, start_secure_nameserver

pytestmark = pytest.mark.integration
HEADERS = bearer(ADMIN)


@pytest.fixture
def ns(graymq_process: StartProcess, fresh_pg_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=start_secure_nameserver(graymq_process, fresh_pg_url), headers=HEADERS,
                      timeout=30) as http:
        yield http


def with_gray_consumer(http: httpx.Client, group: str) -> None:
    """The group with its gray switch on and a live gray consumer (as its heartbeat reports it)."""
    gray = {"group": group, "client_id": "v2-1", "role": "consumer", "gray": True, "state": "GRAY"}
    http.post("/v1/clients/heartbeat", json=gray).raise_for_status()
    http.put(f"/v1/groups/{group}/switch", json={"enabled": True}).raise_for_status()


def twice_at_once(post: Callable[[], httpx.Response]) -> list[httpx.Response]:
    barrier = Barrier(2)

    def click() -> httpx.Response:
        barrier.wait()
        return post()

    with ThreadPoolExecutor(2) as pool:
        return [answer.result() for answer in [pool.submit(click) for _ in range(2)]]


def one_operation(answers: list[httpx.Response]) -> int:
    assert [a.status_code for a in answers] == [200, 200], [a.text for a in answers]
    [operation_id] = {a.json()["operation_id"] for a in answers}
    assert isinstance(operation_id, int)
    return operation_id


def requested(http: httpx.Client, group: str, operation_id: int) -> list[dict[str, Any]]:
    entries = http.get("/v1/audit", params={"group": group, "object_type": "cutover",
                                            "object_id": str(operation_id)}).json()
    return [e for e in entries if e["action"] == "requested"]


def test_a_double_clicked_rollout_runs_once_and_stays_abortable(ns: httpx.Client) -> None:
    group = "G_TWICE"
    with_gray_consumer(ns, group)
    rollout = {"steps": [5, 50], "step_seconds": 60, "reason": "canary"}
    operation_id = one_operation(twice_at_once(lambda: ns.post(f"/console/api/groups/{group}/rollout",
                                                               json=rollout)))
    assert len(requested(ns, group, operation_id)) == 1
    wait_until(lambda: ns.get(f"/v1/cutovers/{operation_id}").json()["step"] == "step 1/2: weight 5%",
               what="the rollout at its first step")
    aborted = ns.post(f"/console/api/operations/{operation_id}/abort", json={"reason": "double click"})
    assert aborted.status_code == 200, aborted.text

    again = ns.post(f"/console/api/groups/{group}/rollout", json=rollout)  # rolling back, still running
    assert (again.status_code, again.json().get("operation_id")) == (200, operation_id), again.text
    assert again.json()["message"].startswith(f"rollout #{operation_id} of {group} is already running here")
    promote = ns.post(f"/console/api/groups/{group}/actions", json={"action": {"action": "promote"}, "reason": "x"})
    assert promote.status_code == 409, promote.text  # another kind of operation runs on the group


def test_a_double_clicked_promote_runs_once(ns: httpx.Client) -> None:
    group = "G_TWICE_PROMOTE"
    with_gray_consumer(ns, group)
    promote = {"action": {"action": "promote"}, "reason": "release"}
    operation_id = one_operation(twice_at_once(lambda: ns.post(f"/console/api/groups/{group}/actions",
                                                               json=promote)))
    assert len(requested(ns, group, operation_id)) == 1


def test_a_rollout_started_from_the_console_rolls_out_the_lane_its_form_names(ns: httpx.Client) -> None:
    group = "G_CONSOLE_LANE"
    v3 = {"group": group, "client_id": "v3-1", "role": "consumer", "declared_lane": "v3", "gray": True, "lane": "v3",
          "state": "GRAY"}
    ns.post("/v1/clients/heartbeat", json=v3).raise_for_status()
    ns.put(f"/v1/groups/{group}/switch", json={"enabled": True}).raise_for_status()
    rollout = {"steps": [5, 50], "step_seconds": 60, "reason": "canary v3", "lane": "v3"}
    preview = ns.post(f"/console/api/groups/{group}/rollout/preview", json=rollout)
    assert preview.json()["message"].startswith(f"rolls lane v3 of {group} out at weights 5% → 50%"), preview.text
    assert ns.post(f"/console/api/groups/{group}/rollout", json={**rollout, "lane": "bad lane"}).status_code == 422
    started = ns.post(f"/console/api/groups/{group}/rollout", json=rollout)
    assert started.status_code == 200, started.text
    operation_id = started.json()["operation_id"]
    wait_until(lambda: ns.get(f"/v1/cutovers/{operation_id}").json()["step"] == "step 1/2: weight 5%",
               what="the lane's rollout at its first step")
    assert ns.get(f"/v1/cutovers/{operation_id}").json()["lane"] == "v3"
    lanes = {lane["lane"]: lane for lane in ns.get(f"/v1/groups/{group}/lanes").json()}
    assert lanes["v3"]["weight"] == 5 and ns.get(f"/v1/groups/{group}").json()["gray_weight"] == 0
    assert ns.post(f"/console/api/operations/{operation_id}/abort", json={"reason": "enough"}).status_code == 200
    wait_until(lambda: ns.get(f"/v1/cutovers/{operation_id}").json()["state"] == "ABORTED",
               what="the lane's rollout rolled back")
    assert "weight" not in {lane["lane"]: lane for lane in ns.get(f"/v1/groups/{group}/lanes").json()}["v3"]
