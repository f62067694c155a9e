"""Lanes (docs/lanes.md): all-groups rules, a group's lanes and its orphan policy per lane, lane slots of topics."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from graymq.nameserver.auth import AdminActor, Authenticated
from graymq.nameserver.deps import Groups, Lanes
from graymq.nameserver.schemas import (
    AllGroupsRuleView,
    GroupLaneView,
    GroupPath,
    IdPath,
    LaneOrphanPolicyPut,
    LanePath,
    RuleCreate,
    TopicLanes,
    TopicPath,
    WeightPut,
)

router = APIRouter(prefix="/v1", tags=["lanes"])
Reason = Annotated[str | None, Query(max_length=2000)]


@router.get("/rules")
def list_all_groups_rules(groups: Groups) -> list[AllGroupsRuleView]:
    """The rules of every group, in evaluation order: each group's own rules come first."""
    return groups.all_groups_rules()


@router.post("/rules")
def put_all_groups_rule(body: RuleCreate, actor: AdminActor, groups: Groups, response: Response) -> AllGroupsRuleView:
    """Append a rule of every group (201), or change the one with the same selector in place (200). Audited; every
    group's watches wake."""
    view, created = groups.put_all_groups_rule(body, actor)
    if created:
        response.status_code = status.HTTP_201_CREATED
    return view


@router.delete("/rules/{rule_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_all_groups_rule(rule_id: IdPath, actor: AdminActor, groups: Groups, reason: Reason = None) -> None:
    groups.delete_all_groups_rule(rule_id, actor, reason)


@router.get("/groups/{group}/lanes")
def group_lanes(group: GroupPath, lanes: Lanes) -> list[GroupLaneView]:
    """Each lane the group meets or has clients in: its live clients in it, whether the group takes part, what the
    group does with the lane's queues no consumer of the lane serves, and the slot it holds per topic."""
    return lanes.lanes_of(group)


@router.put("/groups/{group}/lanes/{lane}/orphan-policy")
def set_lane_orphan_policy(group: GroupPath, lane: LanePath, body: LaneOrphanPolicyPut, actor: AdminActor,
                           lanes: Lanes) -> GroupLaneView:
    """Hold or adopt the lane's queues no consumer of the lane in the group serves (null: back to the default).
    Creates the group when missing; audited; watched."""
    return lanes.set_orphan_policy(group, lane, body, actor)


@router.put("/groups/{group}/lanes/{lane}/weight")
def set_lane_weight(group: GroupPath, lane: LanePath, body: WeightPut, actor: AdminActor,
                    lanes: Lanes) -> GroupLaneView:
    """The percent (0..100) of each subscribed topic's base queues the group's consumers of the lane take, while the
    lane has a consumer in the group and the switch is on (``gray``: the group's weight). The lanes' shares are
    disjoint (docs/lanes.md); 409 when the group's weights would add up to more than 100 %. Creates the group when
    missing; audited; watched."""
    return lanes.set_weight(group, lane, body, actor)


@router.post("/topics/{topic}/lanes/{lane}")
def take_lane_slot(topic: TopicPath, lane: LanePath, caller: Authenticated, lanes: Lanes) -> TopicLanes:
    """The lane takes a slot of the topic (idempotent: a slot it holds is kept). A producer of the topic or an admin
    may; 409 in one line when every slot is held by other lanes."""
    caller.require(caller.rights.admin or caller.rights.may_produce(topic), f"produce to topic {topic}")
    return lanes.take_by_request(topic, lane, caller.name)


@router.delete("/topics/{topic}/lanes/{lane}")
def free_lane_slot(topic: TopicPath, lane: LanePath, actor: AdminActor, lanes: Lanes, reason: Reason = None
                   ) -> TopicLanes:
    """Give the lane's slot of the topic back (idempotent); 409 while a live client is in the lane on the topic."""
    return lanes.give_back(topic, lane, actor, reason)
