"""The console's actions: what an operator may ask for, and how each is carried out.

Switch, flag, rule and weight changes go through the name server's services as the ``/v1`` API would, audited
with the caller as actor and the reason given; promote and rollback start a cutover (see ``operations``).
"""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import BaseModel, Field, model_validator
from sqlalchemy.orm import Session, sessionmaker

from graymq.nameserver.schemas import (
    GRAY_LANE,
    ID_MAX,
    ClientId,
    FlagPut,
    GrayWeight,
    Labels,
    LaneName,
    Reason,
    RuleCreate,
    SwitchPut,
    WeightPut,
    lane_needs_gray,
)
from graymq.nameserver.services.clients import ClientService
from graymq.nameserver.services.groups import GroupService
from graymq.nameserver.settings import NameServerSettings


class SwitchAction(BaseModel):
    action: Literal["switch"]
    enabled: bool


class FlagAction(BaseModel):
    action: Literal["flag"]
    client_id: ClientId
    gray: bool | None = Field(description="the explicit flag; null lets the group's rules decide")
    lane: LaneName | None = Field(default=None, description="with gray true: the lane (default gray; docs/lanes.md)")

    @model_validator(mode="after")
    def _lane_with_gray(self) -> Self:
        self.lane = lane_needs_gray(self.gray, self.lane)
        return self


class RuleAction(BaseModel):
    action: Literal["rule"]
    selector: Annotated[Labels, Field(min_length=1)]
    gray: bool


class RuleDeleteAction(BaseModel):
    action: Literal["rule_delete"]
    rule_id: int = Field(ge=1, le=ID_MAX)


class WeightAction(BaseModel):
    action: Literal["weight"]
    weight: GrayWeight


class PromoteAction(BaseModel):
    action: Literal["promote"]
    lane: LaneName = Field(GRAY_LANE, description="the lane promoted (docs/lanes.md); gray: today's gray side")


class RollbackAction(BaseModel):
    action: Literal["rollback"]
    mode: Literal["drain", "adopt"]
    lane: LaneName = Field(GRAY_LANE, description="the lane rolled back; the other lanes run on untouched")


ConsoleAction = Annotated[
    SwitchAction | FlagAction | RuleAction | RuleDeleteAction | WeightAction | PromoteAction | RollbackAction,
    Field(discriminator="action"),
]
Cutover = PromoteAction | RollbackAction


class PreviewRequest(BaseModel):
    action: ConsoleAction


class ActionRequest(BaseModel):
    action: ConsoleAction
    reason: Reason


class ActionResult(BaseModel):
    """What the console shows after an action; ``operation_id`` for a promote or rollback."""

    message: str
    operation_id: int | None = None


class Preview(BaseModel):
    """What an action will do, in words, for the confirmation."""

    message: str


def perform(sessions: sessionmaker[Session], settings: NameServerSettings, group: str,
            action: SwitchAction | FlagAction | RuleAction | RuleDeleteAction | WeightAction, actor: str,
            reason: str | None) -> ActionResult:
    """Carry out a change that is not a cutover, in one transaction with its audit entry."""
    with sessions() as session:
        groups = GroupService(session, settings)
        match action:
            case SwitchAction(enabled=enabled):
                groups.set_switch(group, SwitchPut(enabled=enabled, reason=reason), actor)
                return ActionResult(message=f"gray switch of {group} turned {'on' if enabled else 'off'}")
            case FlagAction(client_id=client_id, gray=gray, lane=lane):
                result = ClientService(session, settings).set_flag(
                    group, client_id, FlagPut(gray=gray, lane=lane, reason=reason), actor, None)
                shown = "cleared (rules decide)" if result.explicit_gray is None else side_name(gray, lane)
                return ActionResult(message=f"flag of {client_id} set: {shown}")
            case RuleAction(selector=selector, gray=gray):
                view, created = groups.put_rule(group, RuleCreate(selector=selector, gray=gray, reason=reason), actor)
                return ActionResult(message=f"rule #{view.id} {_labels(selector)} → {side_name(gray)} "
                                            f"{'added' if created else 'changed'}")
            case RuleDeleteAction(rule_id=rule_id):
                groups.delete_rule(group, rule_id, actor, reason)
                return ActionResult(message=f"rule #{rule_id} removed")
            case WeightAction(weight=weight):
                groups.set_weight(group, WeightPut(weight=weight, reason=reason), actor)
                return ActionResult(message=f"weight of {group} set to {weight}%")
    raise AssertionError(f"unhandled action {action!r}")


def side_name(gray: bool | None, lane: str | None = None) -> str:
    """How a flag's side reads: ``normal``, ``gray`` or ``lane v3``.

    >>> side_name(False), side_name(True), side_name(True, "v3")
    ('normal', 'gray', 'lane v3')
    """
    if not gray:
        return "normal"
    return "gray" if lane in (None, GRAY_LANE) else f"lane {lane}"


def _labels(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
