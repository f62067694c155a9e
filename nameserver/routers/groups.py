"""Groups: client table, grayFlags, gray switch, orphan policy, weight, gray rules."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Response, status

from graymq.nameserver.auth import AdminActor
from graymq.nameserver.deps import Clients, Groups
from graymq.nameserver.schemas import (
    CLIENTS_PAGE_MAX,
    ID_MAX,
    ClientIdPath,
    ConsumptionPut,
    FlagPut,
    FlagResult,
    GroupClients,
    GroupDetail,
    GroupPath,
    GroupSummary,
    GroupView,
    IdPath,
    OrphanPolicyPut,
    RetiredPut,
    Role,
    RuleCreate,
    RuleView,
    SwitchPut,
    WeightPut,
)

router = APIRouter(prefix="/v1/groups", tags=["groups"])

OperationHeader = Annotated[
    int | None,
    Header(
        alias="X-Graymq-Operation", ge=1, le=ID_MAX,
        description="id of the running cutover operation making this change",
    ),
]


@router.get("")
def list_groups(groups: Groups) -> list[GroupSummary]:
    """Every group with its settings and how many live clients it has."""
    return groups.all()


@router.get("/{group}")
def get_group(group: GroupPath, groups: Groups) -> GroupDetail:
    """404 for a group the name server does not know (reads never create a group)."""
    return groups.detail(group)


@router.delete("/{group}", status_code=status.HTTP_204_NO_CONTENT)
def delete_group(
    group: GroupPath,
    actor: AdminActor,
    groups: Groups,
    reason: Annotated[str | None, Query(max_length=2000)] = None,
) -> None:
    """Delete a group with its rules, cutover records and retry/dead-letter topics (404 unknown; 409 while it
    has live clients or a running cutover); brokers drop its offsets at their next registration. Audited."""
    groups.delete(group, actor, reason)


@router.get("/{group}/clients")
def group_clients(
    group: GroupPath,
    clients: Clients,
    role: Role | None = None,
    limit: Annotated[int | None, Query(ge=1, le=CLIENTS_PAGE_MAX, description="list one page of this many clients "
                                       f"(at most {CLIENTS_PAGE_MAX}); none: every client")] = None,
    offset: Annotated[int, Query(ge=0, le=ID_MAX, description="with limit: the clients to skip (a page's "
                                 "next_offset)")] = 0,
) -> GroupClients:
    """Live clients with their explicit, desired and reported flags, by client id and role: every one, or a page
    (``limit``, ``offset``); ``total`` and ``counts`` (per role and side) always cover every live client."""
    return clients.group_clients(group, role, limit=limit, offset=offset)


@router.put("/{group}/clients/{client_id}/flag")
def set_flag(
    group: GroupPath,
    client_id: ClientIdPath,
    body: FlagPut,
    actor: AdminActor,
    clients: Clients,
    operation: OperationHeader = None,
) -> FlagResult:
    """Set (true/false) or clear (null) a client's explicit grayFlag, for all its roles; audited."""
    return clients.set_flag(group, client_id, body, actor, None if operation is None else str(operation))


@router.put("/{group}/switch")
def set_switch(group: GroupPath, body: SwitchPut, actor: AdminActor, groups: Groups) -> GroupView:
    return groups.set_switch(group, body, actor)


@router.put("/{group}/orphan-policy")
def set_orphan_policy(group: GroupPath, body: OrphanPolicyPut, actor: AdminActor, groups: Groups) -> GroupView:
    return groups.set_orphan_policy(group, body, actor)


@router.put("/{group}/consumption")
def set_consumption(group: GroupPath, body: ConsumptionPut, actor: AdminActor, groups: Groups) -> GroupView:
    """How the group's stock (RocketMQ 5) pop consumers consume, as RocketMQ's subscription group says it: ``fifo``
    and ``max_attempts`` (creates the group when missing). Audited; brokers apply it at the consumers' next
    registration and tell the clients in their settings."""
    return groups.set_consumption(group, body, actor)


@router.put("/{group}/weight")
def set_weight(group: GroupPath, body: WeightPut, actor: AdminActor, groups: Groups) -> GroupView:
    """The percent (0..100) of each subscribed topic's normal queues the group's gray consumers take besides the
    gray queues, while it has gray consumers and its gray switch is on (creates the group when missing). Audited;
    the group's clients learn it through their watch."""
    return groups.set_weight(group, body, actor)


@router.put("/{group}/retired")
def set_retired(group: GroupPath, body: RetiredPut, actor: AdminActor, groups: Groups) -> GroupView:
    """Retire the group's gray side (true): its gray consumers release every queue and consume nothing (state
    RETIRED) while they keep running, and normal consumers adopt the gray queues once the orphan policy is adopt;
    false brings them back. A rollout's automatic rollback sets it; a new rollout clears it. Audited; watched."""
    return groups.set_retired(group, body, actor)


@router.get("/{group}/rules")
def list_rules(group: GroupPath, groups: Groups) -> list[RuleView]:
    """The group's gray rules in evaluation order (first match wins)."""
    return groups.rules_of(group)


@router.post("/{group}/rules")
def put_rule(group: GroupPath, body: RuleCreate, actor: AdminActor, groups: Groups, response: Response) -> RuleView:
    """Append a rule (201), or change the rule with the same selector in place (200)."""
    view, created = groups.put_rule(group, body, actor)
    if created:
        response.status_code = status.HTTP_201_CREATED
    return view


@router.delete("/{group}/rules/{rule_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_rule(
    group: GroupPath,
    rule_id: IdPath,
    actor: AdminActor,
    groups: Groups,
    reason: Annotated[str | None, Query(max_length=2000)] = None,
) -> None:
    groups.delete_rule(group, rule_id, actor, reason)
