"""Groups: client table, grayFlags, gray switch, orphan policy, gray rules."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Response, status

from graymq.nameserver.auth import AdminActor
from graymq.nameserver.deps import Clients, Groups
from graymq.nameserver.schemas import (
    FlagPut,
    FlagResult,
    GroupClients,
    GroupDetail,
    GroupView,
    OrphanPolicyPut,
    Role,
    RuleCreate,
    RuleView,
    SwitchPut,
)

router = APIRouter(prefix="/v1/groups", tags=["groups"])

OperationHeader = Annotated[
    str | None,
    Header(alias="X-Graymq-Operation", description="id of the running cutover operation making this change"),
]


@router.get("")
def list_groups(groups: Groups) -> list[GroupView]:
    return groups.all()


@router.get("/{group}")
def get_group(group: str, groups: Groups) -> GroupDetail:
    return groups.detail(group)


@router.get("/{group}/clients")
def group_clients(group: str, clients: Clients, role: Role | None = None) -> GroupClients:
    """Live clients with their explicit, desired and reported flags."""
    return clients.group_clients(group, role)


@router.put("/{group}/clients/{client_id}/flag")
def set_flag(
    group: str,
    client_id: str,
    body: FlagPut,
    actor: AdminActor,
    clients: Clients,
    operation: OperationHeader = None,
) -> FlagResult:
    """Set (true/false) or clear (null) a client's explicit grayFlag, for all its roles; audited."""
    return clients.set_flag(group, client_id, body, actor, operation)


@router.put("/{group}/switch")
def set_switch(group: str, body: SwitchPut, actor: AdminActor, groups: Groups) -> GroupView:
    return groups.set_switch(group, body, actor)


@router.put("/{group}/orphan-policy")
def set_orphan_policy(group: str, body: OrphanPolicyPut, actor: AdminActor, groups: Groups) -> GroupView:
    return groups.set_orphan_policy(group, body, actor)


@router.get("/{group}/rules")
def list_rules(group: str, groups: Groups) -> list[RuleView]:
    """The group's gray rules in evaluation order (first match wins)."""
    return groups.rules_of(group)


@router.post("/{group}/rules")
def put_rule(group: str, body: RuleCreate, actor: AdminActor, groups: Groups, response: Response) -> RuleView:
    """Append a rule (201), or change the rule with the same selector in place (200)."""
    view, created = groups.put_rule(group, body, actor)
    if created:
        response.status_code = status.HTTP_201_CREATED
    return view


@router.delete("/{group}/rules/{rule_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_rule(
    group: str,
    rule_id: int,
    actor: AdminActor,
    groups: Groups,
    reason: Annotated[str | None, Query(max_length=2000)] = None,
) -> None:
    groups.delete_rule(group, rule_id, actor, reason)
