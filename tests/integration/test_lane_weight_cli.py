"""``graymq gray weight|status|history ... --lane``: a lane's weight set and shown by the CLI against a real name
server process; without ``--lane`` the weight is the group's (gray's) as before; the group's weights are refused in
one line beyond 100 %."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_cli_json_shapes import printed, rest
from tests.support.trust import StartProcess, cli, start_secure_nameserver

pytestmark = pytest.mark.integration
GROUP = "G_LANE_WEIGHTS"
LANE_KEYS = {"lane", "clients", "taking_part", "orphan_policy", "orphan_policy_override", "slots", "weight"}


@pytest.fixture
def ns_url(graymq_process: StartProcess, tmp_path: Path) -> str:
    return start_secure_nameserver(graymq_process, f"sqlite:///{tmp_path}/ns.db")


def run(ns_url: str, *args: str) -> Any:
    result = cli(ns_url, *args)
    assert result.returncode == 0, f"graymq {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def test_a_lane_weight_is_set_shown_in_status_and_refused_beyond_100(ns_url: str) -> None:
    rest(ns_url, "POST", "/v1/clients/heartbeat", json={"group": GROUP, "client_id": "c3", "role": "consumer",
                                                        "declared_lane": "v3"})
    run(ns_url, "gray", "switch", GROUP, "on")
    assert run(ns_url, "gray", "weight", GROUP, "30", "--lane", "v3") == (
        f"weight of lane v3 in {GROUP}: 30% (its consumers of lane v3 also take 30% of each subscribed topic's base "
        "queues)\n")
    shown = printed(ns_url, "gray", "weight", GROUP, "25%", "--lane", "v2", "--json", "--reason", "v2 canary")
    assert set(shown) == LANE_KEYS and (shown["lane"], shown["weight"]) == ("v2", 25)
    settings = printed(ns_url, "gray", "weight", GROUP, "40", "--json")  # no --lane: the group's, as before
    assert settings["gray_weight"] == 40 and "lane" not in settings
    refused = cli(ns_url, "gray", "weight", GROUP, "10", "--lane", "v4")
    assert refused.returncode == 1, refused.stdout
    assert f"the weights of {GROUP}'s lanes would add up to 105% (gray 40%, v2 25%, v3 30%, v4 10%)" in (
        refused.stderr)
    status = printed(ns_url, "gray", "status", GROUP, "--json")
    assert {lane["lane"]: lane["weight"] for lane in status["lanes"]} == {"gray": 40, "v2": 25, "v3": 30}
    assert status["gray_weight"] == 40
    table = run(ns_url, "gray", "status", GROUP)
    header = next(line.split() for line in table.splitlines() if line.startswith("lane "))
    assert header[-1] == "weight"  # the lanes table's last column
    assert next(line for line in table.splitlines() if line.startswith("v3 ")).split()[-1] == "30%"
    audit = json.loads(run(ns_url, "audit", "--group", GROUP, "--json"))
    assert [(e["object_type"], e["object_id"], e["reason"]) for e in audit if e["action"] == "set_weight"
            and e["object_id"] == "v2"] == [("lane", "v2", "v2 canary")]


def test_history_of_a_lane_lists_only_its_operations(ns_url: str) -> None:
    rest(ns_url, "POST", "/v1/clients/heartbeat", json={"group": GROUP, "client_id": "c1", "role": "consumer"})
    for lane in ("v2", "v3"):
        body = {"kind": "rollout", "mode": "promote", "producer_groups": [GROUP], "lane": lane}
        operation = rest(ns_url, "POST", f"/v1/groups/{GROUP}/cutovers", json=body)
        rest(ns_url, "PATCH", f"/v1/cutovers/{operation['id']}", json={"state": "FAILED"})
    only_v3 = printed(ns_url, "gray", "history", GROUP, "--lane", "v3", "--json")
    assert [(op["kind"], op["lane"]) for op in only_v3] == [("rollout", "v3")]
    assert len(printed(ns_url, "gray", "history", GROUP, "--json")) == 2
    assert "rollout of lane v3" in run(ns_url, "gray", "history", GROUP, "--lane", "v3")
    assert run(ns_url, "gray", "history", GROUP, "--lane", "v9") == (
        f"no promote, rollback or rollout of {GROUP} (lane v9) recorded\n")
