"""Cutover operations (promote, rollback) as recorded by the gray controller."""

from __future__ import annotations

from fastapi import APIRouter, status

from graymq.nameserver.auth import AdminActor
from graymq.nameserver.deps import Cutovers
from graymq.nameserver.schemas import CutoverCreate, CutoverPatch, CutoverState, CutoverView, GroupPath, IdPath

router = APIRouter(prefix="/v1", tags=["cutovers"])


@router.post("/groups/{group}/cutovers", status_code=status.HTTP_201_CREATED)
def start_cutover(group: GroupPath, body: CutoverCreate, actor: AdminActor, cutovers: Cutovers) -> CutoverView:
    """Start an operation; 409 (with the running one as detail) when the group already has one."""
    return cutovers.start(group, body, actor)


@router.get("/groups/{group}/cutovers")
def list_cutovers(group: GroupPath, cutovers: Cutovers, state: CutoverState | None = None) -> list[CutoverView]:
    """The group's operations, newest first."""
    return cutovers.of_group(group, state)


@router.get("/cutovers/{operation_id}")
def get_cutover(operation_id: IdPath, cutovers: Cutovers) -> CutoverView:
    return cutovers.get(operation_id)


@router.patch("/cutovers/{operation_id}")
def update_cutover(
    operation_id: IdPath, body: CutoverPatch, actor: AdminActor, cutovers: Cutovers
) -> CutoverView:
    """Record a step, a result, or the final state (which sets ``finished_at``)."""
    return cutovers.update(operation_id, body, actor)
