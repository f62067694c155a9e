"""``NameServerClient``'s lane calls against a real name server process: typed records back, the refusals as
``ConflictError`` carrying the one-line text, a producer of a topic taking a slot with its own token."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from graymq.nameserver_api.client import ConflictError, NameServerClient
from graymq.nameserver_api.lane_records import GroupLane, LaneRule, TopicLanes
from graymq.protocol.errors import ForbiddenError
from tests.support.trust import ADMIN, StartProcess, add_principal, start_secure_nameserver

pytestmark = pytest.mark.integration


def test_lane_calls_answer_typed_records_and_refuse_in_one_line(graymq_process: StartProcess, tmp_path: Path) -> None:
    url = start_secure_nameserver(graymq_process, f"sqlite:///{tmp_path}/ns.db")
    producer = add_principal(url, "orders", "--produce", "T_API")
    stranger = add_principal(url, "stranger", "--produce", "OTHER")

    async def scenario() -> None:
        admin = NameServerClient(url, token=ADMIN, admin_token=ADMIN)
        orders, other = NameServerClient(url, token=producer), NameServerClient(url, token=stranger)
        try:
            await admin.put_topic_lanes("T_API", 8, 2, 2)
            assert await orders.take_lane_slot("T_API", "v2") == TopicLanes("T_API", 2, {"v2": 0})
            with pytest.raises(ForbiddenError):
                await other.take_lane_slot("T_API", "v3")
            assert (await admin.take_lane_slot("T_API", "v3")).lanes == {"v2": 0, "v3": 1}
            with pytest.raises(ConflictError) as full:
                await admin.take_lane_slot("T_API", "v4")
            assert full.value.message.endswith(
                "CONFLICT: topic T_API has no free lane slot (2 of 2 held by v2, v3): grow it (graymq topic update "
                "T_API --lanes 3) or end a lane")
            with pytest.raises(ConflictError, match="cannot shrink to 1"):
                await admin.put_topic_lanes("T_API", 8, 2, 1)
            rule = await admin.add_all_groups_rule({"host": "orders-v3-*"}, "v3", "pods of v3")
            assert isinstance(rule, LaneRule) and (rule.group, rule.lane) == (None, "v3")
            assert await admin.list_all_groups_rules() == [rule]
            group_rule = await admin.add_lane_rule("G", {"v": "2"}, "v2")
            assert (group_rule.group, group_rule.lane) == ("G", "v2")
            policy = await admin.set_lane_orphan_policy("G", "v3", "hold", "waiting for v3 consumers")
            assert policy == GroupLane("v3", (), False, "hold", "hold", {"T_API": 1})
            lanes = {lane.lane: lane for lane in await admin.group_lanes("G")}
            assert (lanes["v2"].taking_part, lanes["v2"].orphan_policy, lanes["v2"].slots) == (True, "hold",
                                                                                               {"T_API": 0})
            assert (await admin.free_lane_slot("T_API", "v3", "rolled back")).lanes == {"v2": 0}
            await admin.delete_all_groups_rule(rule.id)
            assert await admin.list_all_groups_rules() == []
        finally:
            for client in (admin, orders, other):
                await client.close()

    asyncio.run(scenario())
