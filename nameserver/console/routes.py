"""The console's routes: page shells (open, they hold no data), HTML fragments the pages fetch with the browser's
bearer token (any authenticated caller, like the ``/v1`` reads), and actions (admin only).

The token never travels in a URL: the pages' script keeps it in the browser's session storage and sends it as
``Authorization: Bearer``. In dev mode no token is needed, as for the API.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from datetime import datetime
from pathlib import Path as FilePath
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.templating import Jinja2Templates
from starlette.concurrency import run_in_threadpool

from graymq.nameserver.auth import AdminActor, authenticated
from graymq.nameserver.clock import utc_now
from graymq.nameserver.console.actions import (
    ActionRequest,
    ActionResult,
    Cutover,
    Preview,
    PreviewRequest,
    PromoteAction,
    RollbackAction,
    perform,
)
from graymq.nameserver.console.audit_changes import field_changes
from graymq.nameserver.console.lane_view import LANE_CLIENTS_SHOWN, lane_colour
from graymq.nameserver.console.operations import ConsoleOperations, run_cutover
from graymq.nameserver.console.preview import describe
from graymq.nameserver.console.reads import ConsoleReader
from graymq.nameserver.console.rollout_view import rollout_view
from graymq.nameserver.console.rollouts import AbortRequest, ConsoleRollouts, RolloutRequest, form_defaults
from graymq.nameserver.console.rollouts import describe as describe_rollout
from graymq.nameserver.errors import Conflict
from graymq.nameserver.schemas import (
    GRAY_LANE,
    ID_MAX,
    CutoverPatch,
    CutoverView,
    GroupName,
    GroupPath,
    IdPath,
    Text,
)
from graymq.nameserver.services.audit import AuditService
from graymq.nameserver.services.cutovers import CutoverService
from graymq.nameserver.services.health_history import WINDOW_S, HealthHistory
from graymq.protocol.operations import CutoverState

START_WAIT_S = 10.0  # for a started cutover's record to appear
templates = Jinja2Templates(directory=FilePath(__file__).parent / "templates")

pages = APIRouter(prefix="/console", include_in_schema=False)
data = APIRouter(prefix="/console", include_in_schema=False, dependencies=[Depends(authenticated)])


def _ago(moment: datetime | None) -> str:
    if moment is None:
        return ""
    seconds = max(0.0, (utc_now() - moment).total_seconds())
    return f"{seconds:.1f} s ago" if seconds < 60 else f"{seconds / 60:.0f} min ago" if seconds < 3600 \
        else moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _duration(op: CutoverView) -> str:
    end = op.finished_at or utc_now()
    return f"{(end - op.started_at).total_seconds():.1f} s"


templates.env.filters["ago"] = _ago
templates.env.filters["duration"] = _duration
templates.env.filters["num"] = lambda n: "?" if n is None else f"{n:,}"
templates.env.globals["field_changes"] = field_changes
templates.env.globals["rollout_view"] = rollout_view
templates.env.globals["lane_colour"] = lane_colour
templates.env.globals["lane_clients_shown"] = LANE_CLIENTS_SHOWN
templates.env.filters["labels"] = lambda labels: ", ".join(f"{k}={v}" for k, v in sorted(labels.items()))


def bearer_token(request: Request) -> str:
    """The caller's bearer token, empty when it sent none."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def _reader(request: Request) -> ConsoleReader:
    state = request.app.state
    return ConsoleReader(state.read_sessions, state.settings, bearer_token(request), state.console_drains)


Reader = Annotated[ConsoleReader, Depends(_reader)]


# Pages run only the console's own script and style: nothing inline, nothing from elsewhere, never in a frame.
SECURITY_HEADERS = {"Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; base-uri 'none'",
                    "Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff"}


def _page(request: Request, name: str, **context: Any) -> HTMLResponse:
    context.setdefault("dev_mode", request.app.state.settings.dev_mode)
    context.setdefault("rollout_defaults", form_defaults())  # the rollout form's defaults, the CLI's too
    return templates.TemplateResponse(request, name, context, headers=SECURITY_HEADERS)


# -- page shells -----------------------------------------------------------------------------
@pages.get("")
def console_root() -> RedirectResponse:
    return RedirectResponse("/console/")


@pages.get("/")
def groups_page(request: Request) -> HTMLResponse:
    return _page(request, "page.html", title="Groups", fragment="/console/fragments/groups", refresh_ms=2000)


@pages.get("/groups/{group}")
def group_page(request: Request, group: GroupPath) -> HTMLResponse:
    return _page(request, "page.html", title=f"Group {group}", group=group,
                 fragment=f"/console/fragments/groups/{group}", refresh_ms=1000)


@pages.get("/operations")
def operations_page(request: Request) -> HTMLResponse:
    return _page(request, "page.html", title="Operations", fragment="/console/fragments/operations",
                 refresh_ms=2000)


@pages.get("/audit")
def audit_page(request: Request) -> HTMLResponse:
    return _page(request, "page.html", title="Audit log", fragment="/console/fragments/audit", refresh_ms=0,
                 filters=True)


# -- fragments -------------------------------------------------------------------------------
@data.get("/fragments/groups")
async def groups_fragment(request: Request, reader: Reader) -> HTMLResponse:
    return _page(request, "groups.html", rows=await reader.groups())


@data.get("/fragments/groups/{group}")
async def group_fragment(request: Request, group: GroupPath, reader: Reader,
                         clients_page: Annotated[int, Query(ge=1, le=ID_MAX)] = 1) -> HTMLResponse:
    """The group page; ``clients_page``: the page of its client table (the page's ``#clients=N``)."""
    return _page(request, "group.html", page=await reader.group_page(group, clients_page))


@data.get("/fragments/operations")
async def operations_fragment(request: Request, reader: Reader) -> HTMLResponse:
    return _page(request, "operations.html", operations=await run_in_threadpool(reader.operations))


@data.get("/fragments/audit")
async def audit_fragment(
    request: Request,
    reader: Reader,
    group: Annotated[GroupName | None, Query()] = None,
    object_type: Annotated[Text | None, Query(max_length=32)] = None,
    object_id: Annotated[Text | None, Query(max_length=255)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> HTMLResponse:
    entries = await run_in_threadpool(reader.audit, group or None, object_type or None, object_id or None, limit)
    return _page(request, "audit.html", entries=entries)


@data.get("/api/groups/{group}/health")
def group_health(request: Request, group: GroupPath) -> dict[str, Any]:
    """The group's consume health per side (normal, gray, each other lane) over the last minutes, oldest point first
    (``health_history``), and each lane's colour class: kept by this name server process only, so it starts empty
    after a restart."""
    history: HealthHistory = request.app.state.health_history
    sides = history.series(group)
    return {"group": group, "sample_s": history.sample_s, "window_s": WINDOW_S, "sides": sides,
            "colours": {side: lane_colour(side) for side in sides if side != "normal"}}


# -- actions ---------------------------------------------------------------------------------
@data.post("/api/groups/{group}/preview")
async def preview(group: GroupPath, body: PreviewRequest, _actor: AdminActor, reader: Reader) -> Preview:
    """What the action would do now, for the confirmation."""
    detail, clients, qmap = await reader.group_state(group)
    return Preview(message=describe(body.action, detail, clients, qmap))


@data.post("/api/groups/{group}/actions")
async def act(group: GroupPath, body: ActionRequest, actor: AdminActor, request: Request) -> ActionResult:
    """Carry the action out as the caller; a promote or rollback answers once its operation is recorded."""
    state = request.app.state
    action = body.action
    if isinstance(action, PromoteAction | RollbackAction):
        return await _start_cutover(request, group, action, actor, body.reason)
    return await run_in_threadpool(perform, state.sessions, state.settings, group, action, actor, body.reason)


async def _start_cutover(request: Request, group: str, action: Cutover, actor: str, reason: str | None
                         ) -> ActionResult:
    return await _start_operation(request, group, action.action, actor, reason, lambda: run_cutover(
        group, action, _own_url(request), bearer_token(request) or None), action.lane)


@data.post("/api/groups/{group}/rollout/preview")
async def rollout_preview(group: GroupPath, body: RolloutRequest, _actor: AdminActor) -> Preview:
    """What the rollout will do, for the confirmation; a value out of range is refused here, before it."""
    return Preview(message=describe_rollout(group, body.policies()[0], body.lane))


@data.post("/api/groups/{group}/rollout")
async def start_rollout(group: GroupPath, body: RolloutRequest, actor: AdminActor, request: Request
                        ) -> ActionResult:
    """Start ``graymq gray rollout``'s runbook in this name server as the caller; answers once it is recorded."""
    policies = body.policies()
    rollouts: ConsoleRollouts = request.app.state.console_rollouts
    return await _start_operation(request, group, "rollout", actor, body.reason, lambda: rollouts.run(
        group, policies, _own_url(request), bearer_token(request) or None, body.lane), body.lane or GRAY_LANE)


@data.post("/api/operations/{operation_id}/abort")
async def abort_operation(operation_id: IdPath, body: AbortRequest, actor: AdminActor,
                          request: Request) -> ActionResult:
    """Make a rollout this name server runs roll back now, as a failed check would; stop a promote or rollback it
    runs where it is (recorded FAILED). Audited as the caller."""
    state = request.app.state

    def operation() -> CutoverView:
        with state.read_sessions() as session:
            return CutoverService(session).get(operation_id)

    op = await run_in_threadpool(operation)
    if op.state != "RUNNING":
        raise Conflict(f"{op.kind} #{op.id} is {op.state}: only a running operation can be aborted")
    if op.kind != "rollout":
        return await _abort_cutover(request, op, actor, body.reason)
    rollouts: ConsoleRollouts = state.console_rollouts
    rollouts.abort(operation_id, actor)
    await run_in_threadpool(_record, state.sessions, op, actor, "abort", {"phase": "rollback"}, body.reason)
    return ActionResult(message=f"rollout #{op.id} of {op.group} aborted: rolling back (weight 0, the gray side "
                                "retires, the normal consumers adopt its queues)", operation_id=op.id)


async def _abort_cutover(request: Request, op: CutoverView, actor: str, reason: str | None) -> ActionResult:
    """Stop the promote or rollback ``op`` this console runs where it is, and record it FAILED saying so."""
    state = request.app.state
    console: ConsoleOperations = state.console_operations
    started = console.running(op.group, op.lane)
    of = f"{op.kind} #{op.id} of {op.group}" + ("" if op.lane == GRAY_LANE else f" lane {op.lane}")
    if started is None or started.what != op.kind or op.id <= started.after_id:
        raise Conflict(f"{of} is not run by this name server's console: stop it where it runs (an interrupted "
                       "`graymq gray` command leaves it RUNNING, resumable)")
    await console.cancel(started)
    message = (f"aborted from the console by {actor}: the lane is left as that step left it; promote or roll back "
               "it again to end it")

    def record() -> CutoverView:
        with state.sessions() as session:
            current = CutoverService(session).get(op.id)
            if current.state != "RUNNING":
                raise Conflict(f"{of} ended {current.state} before the abort took effect")
            result = {**(current.result or {}), "state": "FAILED", "message": message,
                      "aborted_at_step": current.step or "start"}
            return CutoverService(session).update(op.id, CutoverPatch(state=CutoverState.FAILED, result=result),
                                                  actor)

    ended = await run_in_threadpool(record)
    await run_in_threadpool(_record, state.sessions, ended, actor, "abort", {"step": ended.step}, reason)
    return ActionResult(message=f"{of} aborted at step {ended.step or 'start'}: stopped there, recorded FAILED; "
                                "promote or roll back the lane again to end it", operation_id=op.id)


async def _start_operation(request: Request, group: str, what: str, actor: str, reason: str | None,
                           work: Callable[[], Coroutine[Any, Any, None]], lane: str = GRAY_LANE) -> ActionResult:
    """Run ``work`` here and answer once its operation is recorded; idempotent per group and lane: while this
    console runs a ``what`` of the lane (a double click), the start answers that operation and starts nothing. 409
    while the lane has another running operation."""
    state = request.app.state
    console: ConsoleOperations = state.console_operations
    of = group if lane == GRAY_LANE else f"{group} lane {lane}"

    def operations() -> list[CutoverView]:
        with state.read_sessions() as session:
            return [op for op in CutoverService(session).of_group(group, None) if op.lane == lane]

    before = await run_in_threadpool(operations)
    started = console.running(group, lane)  # read after the await: nothing else runs until the start below
    repeated = started is not None
    if started is None:
        running = [op for op in before if op.state == "RUNNING"]
        if running:
            op = running[0]
            resume = f"graymq gray {op.kind} {group}" + ("" if lane == GRAY_LANE else f" --lane {lane}")
            raise Conflict(f"{op.kind} #{op.id} is already running on {of} (started by {op.started_by}); if "
                           f"its controller stopped, `{resume}` resumes it", op.model_dump(mode="json"))
        started = console.start(group, what, before[0].id if before else 0, work(), lane)
    elif started.what != what:
        raise Conflict(f"a {started.what} of {of} is running from this name server's console: start the {what} "
                       f"once it has ended")
    deadline = time.monotonic() + START_WAIT_S
    while True:
        recorded = [op for op in await run_in_threadpool(operations) if op.id > started.after_id]
        if recorded:
            op = recorded[-1]
            if repeated:
                return ActionResult(message=f"{op.kind} #{op.id} of {of} is already running here (started by "
                                            f"{op.started_by}); nothing else started", operation_id=op.id)
            await run_in_threadpool(_record, state.sessions, op, actor, "requested",
                                    {"kind": op.kind, "mode": op.mode, "from": "console",
                                     **({} if lane == GRAY_LANE else {"lane": lane})}, reason)
            return ActionResult(message=f"{op.kind} #{op.id} of {of} started (runs in the name server; its steps "
                                        "show below)", operation_id=op.id)
        if started.task.done() or time.monotonic() > deadline:
            raise Conflict(f"the {what} of {of} did not start (see the name server's log)")
        await asyncio.sleep(0.05)


def _record(sessions: Any, op: CutoverView, actor: str, action: str, after: dict[str, Any], reason: str | None
            ) -> None:
    """What the operator asked of an operation, with the reason, next to the operation's own audit entries."""
    with sessions() as session:
        AuditService(session).record(actor=actor, object_type="cutover", object_id=op.id, action=action,
                                     group=op.group, after=after, reason=reason)
        session.commit()


def _own_url(request: Request) -> str:
    """This name server's address as the connection reached it (the socket it listens on, not a proxy's)."""
    host, port = request.scope["server"]
    host = f"[{host}]" if ":" in host else host
    return f"{request.url.scheme}://{host}:{port}"
