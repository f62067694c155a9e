"""A rollout of one lane judges that lane's consumers against the base ones (docs/lanes.md): another lane's figures
are left out, as are producers; its report names the lane, a rollout of ``gray`` reads as before lanes."""

from __future__ import annotations

import asyncio

import pytest

from graymq.nameserver_api.client import NameServerClient
from graymq.protocol.operations import CutoverKind, CutoverMode
from graymq.runbooks.group_state import GroupStatus
from graymq.runbooks.policy import RolloutPolicy
from graymq.runbooks.rollout import RolloutReport, RolloutRunner
from tests.support.records import client_record

pytestmark = pytest.mark.unit
HEALTH = {"gray": {"consumed": 5}}


def status() -> GroupStatus:
    clients = [client_record("b1", health={"normal": {"consumed": 7}}),
               client_record("v2a", gray=True, lane="v2", health=HEALTH),
               client_record("v3a", gray=True, lane="v3", health=HEALTH),
               client_record("g1", gray=True, health=HEALTH),
               client_record("p2", role="producer", gray=True, lane="v2", health=HEALTH)]
    return GroupStatus("G", True, "hold", clients)


def judged(lane: str) -> list[str]:
    async def go() -> list[str]:
        runner = RolloutRunner(NameServerClient("http://127.0.0.1:9"), "G", RolloutPolicy([10], 1.0), lane=lane)
        try:
            return sorted(runner._health_by_client(status()))
        finally:
            await runner.close()

    return asyncio.run(go())


def test_a_lane_rollout_judges_its_own_consumers_against_the_base_ones_only() -> None:
    assert judged("v2") == ["b1", "v2a"]
    assert judged("v3") == ["b1", "v3a"]
    assert judged("gray") == ["b1", "g1"]  # without other lanes: every consumer, as before lanes


def test_a_rollout_report_names_its_lane_unless_it_is_gray() -> None:
    report = RolloutReport(1, CutoverKind.ROLLOUT, CutoverMode.PROMOTE, "G")
    assert "lane" not in report.to_json()
    report.lane = "v3"
    assert report.to_json()["lane"] == "v3"
