"""Cutover operations: at most one RUNNING per group, recorded step by step by the gray controller."""

from __future__ import annotations

from sqlalchemy.orm import Session

from graymq.nameserver.clock import utc_now
from graymq.nameserver.errors import Conflict, NotFound
from graymq.nameserver.models import RUNNING, CutoverOperation, Group
from graymq.nameserver.repositories.cutovers import CutoverRepository
from graymq.nameserver.repositories.groups import GroupRepository
from graymq.nameserver.schemas import GRAY_LANE, CutoverCreate, CutoverPatch, CutoverView
from graymq.nameserver.services.audit import AuditService
from graymq.nameserver.services.views import cutover_view
from graymq.nameserver.watch import mark_changed
from graymq.protocol.operations import PAST_WEIGHT_STEPS


class CutoverService:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.groups = GroupRepository(session)
        self.cutovers = CutoverRepository(session)
        self.audit = AuditService(session)

    def _group(self, name: str, *, lock: bool = False) -> Group:
        group = self.groups.get(name, lock=lock)
        if group is None:
            raise NotFound(f"group {name} is unknown")
        return group

    def start(self, group_name: str, body: CutoverCreate, actor: str) -> CutoverView:
        """Record a new RUNNING operation; 409 with the running one when the group already has one of that lane."""
        group = self._group(group_name, lock=True)
        running = self.cutovers.running(group.id, body.lane)
        if running is not None:
            of_lane = "" if body.lane == GRAY_LANE else f" (lane {body.lane})"
            raise Conflict(
                f"cutover {running.id} is already running on group {group.name}{of_lane}", cutover_view(running)
            )
        now = utc_now()
        operation = self.cutovers.add(
            CutoverOperation(
                group=group,
                kind=body.kind.value,
                mode=body.mode.value,
                lane=body.lane,
                producer_groups=body.producer_groups,
                state=RUNNING.value,
                started_by=actor,
                started_at=now,
                updated_at=now,
            )
        )
        view = cutover_view(operation)
        self.audit.record(
            actor=actor,
            object_type="cutover",
            object_id=operation.id,
            action="start",
            group=group.name,
            after=view.model_dump(),
        )
        self.session.commit()
        return view

    def of_group(self, group_name: str, state: str | None) -> list[CutoverView]:
        group = self._group(group_name)
        return [cutover_view(op) for op in self.cutovers.of_group(group.id, state)]

    def get(self, operation_id: int) -> CutoverView:
        operation = self.cutovers.get(operation_id)
        if operation is None:
            raise NotFound(f"cutover {operation_id} is unknown")
        return cutover_view(operation)

    def update(self, operation_id: int, patch: CutoverPatch, actor: str) -> CutoverView:
        """Record progress or the outcome; 409 for a transition ``CutoverState.is_transition_valid`` refuses (a
        finished operation is immutable; only a rollout ends ABORTED)."""
        operation = self.cutovers.get(operation_id, lock=True)
        if operation is None:
            raise NotFound(f"cutover {operation_id} is unknown")
        before = cutover_view(operation)
        if before.state.finished:
            raise Conflict(f"cutover {operation_id} already finished ({before.state})", before)
        target = patch.state or before.state
        if not before.state.is_transition_valid(target, before.kind):
            raise Conflict(f"cutover {operation_id} is a {before.kind}: it cannot go from {before.state} to {target}",
                           before)
        changes = patch.model_dump(mode="json", exclude_unset=True)  # the state stored as its value
        if changes.get("state", RUNNING) is None:
            del changes["state"]
        step = changes.get("step")
        if operation.kind == "rollout" and step in PAST_WEIGHT_STEPS and step != operation.step:
            for producer_group in operation.producer_groups or ():  # they honour no marks from now
                mark_changed(self.session, producer_group)
        for field, value in changes.items():
            setattr(operation, field, value)
        now = utc_now()
        operation.updated_at = now
        if target.finished:
            operation.finished_at = now
        self.session.flush()
        after = cutover_view(operation)
        self.audit.record(
            actor=actor,
            object_type="cutover",
            object_id=operation.id,
            action="update",
            group=operation.group.name,
            before=before.model_dump(include=set(changes)),
            after=after.model_dump(include=set(changes)),
        )
        self.session.commit()
        return after
