"""``NameServerClient`` answers about a group as typed values (settings, rules, running operation), on a real name
server process; ``to_json`` gives the name server's JSON back (what ``graymq gray weight --json`` prints)."""

from __future__ import annotations

import pytest

from graymq.nameserver_api.client import NameServerClient
from graymq.nameserver_api.records import GroupDetail, GroupSettings, GroupSummary
from graymq.protocol.operations import CutoverState

pytestmark = pytest.mark.integration
GROUP = "G_RECORDS"


def test_a_groups_settings_rules_and_running_operation_are_typed(cluster) -> None:
    async def go(ns: NameServerClient) -> tuple[GroupSettings, GroupDetail, dict, int]:
        await ns.client_heartbeat({"group": GROUP, "client_id": "c1", "role": "consumer"})
        await ns.add_rule(GROUP, {"version": "v2"}, True)
        weighted = await ns.set_weight(GROUP, 30, "typed")
        op = await ns.start_cutover(GROUP, "promote", "drain", [GROUP])
        return weighted, await ns.get_group(GROUP), await ns.request("GET", f"/v1/groups/{GROUP}"), op.id

    weighted, detail, raw, operation_id = cluster.ns_call(go)
    assert (weighted.group, weighted.gray_weight, weighted.orphan_policy) == (GROUP, 30, "hold")
    assert detail.settings.to_json() == {key: raw[key] for key in detail.settings.to_json()}
    assert [(rule.selector, rule.gray) for rule in detail.rules] == [({"version": "v2"}, True)]
    assert detail.running_cutover is not None
    assert (detail.running_cutover.id, detail.running_cutover.state) == (operation_id, CutoverState.RUNNING)


def test_listed_groups_are_typed_and_give_back_the_name_servers_json(cluster) -> None:
    async def go(ns: NameServerClient) -> tuple[list[GroupSummary], list]:
        await ns.client_heartbeat({"group": "G_LISTED", "client_id": "c1", "role": "consumer"})
        return await ns.list_groups(), await ns.request("GET", "/v1/groups")

    groups, raw = cluster.ns_call(go)
    assert [(g.settings.group, g.live_clients) for g in groups] == [("G_LISTED", 1)]
    assert [g.to_json() for g in groups] == raw  # what `graymq group list --json` prints, unchanged
