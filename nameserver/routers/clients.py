"""Client self-reports, watches and unregistration: a client acts only for groups and topics its principal covers,
and only as a client its principal registered (see ``ClientBinding``; admins act on any client)."""

from __future__ import annotations

import asyncio
import functools
import time
import weakref
from collections.abc import Callable, Sequence
from typing import TypeVar

from fastapi import APIRouter, Request, status
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import State

from graymq.nameserver.admission import Admission
from graymq.nameserver.auth import Authenticated, Caller, check_client
from graymq.nameserver.deps import Clients
from graymq.nameserver.errors import ApiError
from graymq.nameserver.metrics import Metrics
from graymq.nameserver.schemas import (
    ClientAliveResult,
    ClientHeartbeat,
    ClientHeartbeatResponse,
    ClientHeartbeatResult,
    ClientHeartbeats,
    ClientHeartbeatsResponse,
    ClientIdPath,
    ClientWatch,
    ClientWatches,
    ClientWatchesResponse,
    GroupPath,
    Role,
    WatchedState,
)
from graymq.nameserver.services.clients import ClientService, GroupViews, Stored
from graymq.nameserver.watch import GroupChanges, wait_changed

router = APIRouter(prefix="/v1", tags=["clients"])
T = TypeVar("T")
NOT_MODIFIED = ClientHeartbeatResult(status_code=304)  # a watch with ``since`` whose view is what its known says


@router.post("/clients/heartbeat")
async def client_heartbeat(body: ClientHeartbeat, caller: Authenticated, request: Request) -> ClientHeartbeatResponse:
    """Report a client's labels, effective flag, state and queues; answers with the flag it should have.

    The first heartbeat binds the client to the caller's principal; 403 for a live client of another principal.
    (Its session and service are made in the one thread-pool call that uses them: every client heartbeats, and
    each dependency run in the pool was a thread hop of its own.)"""
    check_client(caller, body.group, body.role, body.topics)
    state = request.app.state

    def beat() -> ClientHeartbeatResponse:
        with state.sessions() as session:
            return ClientService(session, state.settings).heartbeat(body, caller)

    admission: Admission = state.heartbeat_admission
    return await admission.run(beat, request, shed=True)


@router.post("/clients/heartbeats")
async def client_heartbeats(body: ClientHeartbeats, caller: Authenticated, request: Request
                            ) -> ClientHeartbeatsResponse:
    """Several clients' heartbeats in one call and one thread-pool hop, each checked, stored and answered as
    ``POST /clients/heartbeat`` would (those of registered clients in one transaction: ``ClientService.heartbeats``);
    a heartbeat refused (403 for a group beyond the caller's rights or a client of another principal) gets its own
    error in its result and the others go on.

    ``alive`` (optional) lists clients whose reports did not change since their last full heartbeat answered 200:
    each gets only ``last_seen`` refreshed (and ``health`` stored when it carries one), all in a constant number of
    statements, and no answer is computed; changes reach them by their watches (``POST /clients/watches``). The
    answer's ``alive`` holds one status per entry, in order: 200 refreshed; 404 unknown, not live (silent for half
    the expiry) or another principal's (the client then sends its full heartbeat); 403 beyond the caller's rights.
    ``alive_ids`` (optional) does the same by the ``alive_id`` each stored heartbeat's result gives, in one
    statement for the whole list: a process's unchanged clients cost an int each; the answer's ``alive_missing``
    lists those not refreshed (as a 404 above)."""
    state = request.app.state
    refused, allowed = _checked(body.heartbeats, lambda beat: check_client(caller, beat.group, beat.role, beat.topics))
    refused_alive, alive_allowed = _checked(body.alive, lambda entry: check_client(caller, entry.group, entry.role))
    outcomes: dict[int, Stored | ApiError] = dict(refused)
    alive: dict[int, ApiError | None] = dict(refused_alive)

    def beat_all() -> tuple[list[Stored | ApiError], list[ApiError | None], list[int]]:
        with state.sessions() as session:
            service = ClientService(session, state.settings)
            return (service.heartbeats([body.heartbeats[i] for i in allowed], caller),
                    service.alive([body.alive[i] for i in alive_allowed], caller),
                    service.alive_ids(body.alive_ids, caller))

    admission: Admission = state.heartbeat_admission
    answers, refreshed, missing = await admission.run(beat_all, request, shed=True)
    metrics: Metrics = state.metrics
    metrics.beats(len(allowed), len(alive_allowed), len(body.alive_ids))
    outcomes.update(zip(allowed, answers, strict=True))
    alive.update(zip(alive_allowed, refreshed, strict=True))
    return ClientHeartbeatsResponse(results=[_result(outcomes[index]) for index in range(len(body.heartbeats))],
                                    alive=[_alive_result(alive[index]) for index in range(len(body.alive))],
                                    alive_missing=missing if body.alive_ids else None)


def _checked(items: Sequence[T], check: Callable[[T], None]
             ) -> tuple[dict[int, ApiError], list[int]]:
    """The errors of the items ``check`` refuses (by index), and the indexes of the others."""
    refused: dict[int, ApiError] = {}
    for index, item in enumerate(items):
        try:
            check(item)
        except ApiError as error:
            refused[index] = error
    return refused, [index for index in range(len(items)) if index not in refused]


def _result(outcome: ClientHeartbeatResponse | Stored | ApiError) -> ClientHeartbeatResult:
    """A batch's result: an error, a watch's view, or a heartbeat's answer with its alive id."""
    if isinstance(outcome, ApiError):
        return ClientHeartbeatResult(status_code=outcome.status_code, error=outcome.error, detail=outcome.detail)
    if isinstance(outcome, tuple):
        return ClientHeartbeatResult(answer=outcome[0], alive_id=outcome[1])
    return ClientHeartbeatResult(answer=outcome)


def _alive_result(outcome: ApiError | None) -> ClientAliveResult:
    if isinstance(outcome, ApiError):
        return ClientAliveResult(status_code=outcome.status_code, error=outcome.error, detail=outcome.detail)
    return ClientAliveResult()


@router.post("/clients/watch")
async def client_watch(body: ClientWatch, caller: Authenticated, request: Request) -> ClientHeartbeatResponse:
    """What a heartbeat would answer, once its desired flag, gray switch, orphan policy or weight differs from
    ``known`` (at once when it already does, or ``known`` is absent), or after ``timeout_s`` at the latest. A
    ``known`` without ``gray_weight``, ``gray_retired``, ``desired_lane`` or ``lanes`` (a client that does not act on
    them) is not compared on them.

    A change committed through any name server on the same database wakes the watch; the client
    then heartbeats as usual to report what it applied. 404 until the client's first heartbeat; 403 for a live
    client of another principal.
    """
    check_client(caller, body.group, body.role)
    state = request.app.state
    changes: GroupChanges = state.group_changes
    deadline = time.monotonic() + body.timeout_s

    def read() -> ClientHeartbeatResponse:
        with state.read_sessions() as session:
            return ClientService(session, state.settings).view(body, caller)

    admission: Admission = state.watch_admission

    async def reread(changed: asyncio.Event) -> ClientHeartbeatResponse:
        """After a wake-up: the group's one shared read since ``changed`` was taken (else this client's own)."""
        shared = (await _group_views(state, body.group, changed)).view(body, caller)
        return shared if shared is not None else await admission.run(read, request)

    metrics: Metrics = state.metrics
    metrics.watching(+1)
    try:
        woken: asyncio.Event | None = None  # the event that ended the last wait, if one did
        while True:
            changed = changes.changed(body.group)
            view = await (reread(changed) if woken is not None and woken.is_set() else admission.run(read, request))
            woken = changed
            remaining = deadline - time.monotonic()
            if body.known is None or _watched(view, body.known) != body.known or remaining <= 0 or changes.closing:
                return view
            await wait_changed(changed, remaining)
    finally:
        metrics.watching(-1)


@router.post("/clients/watches")
async def client_watches(body: ClientWatches, caller: Authenticated, request: Request) -> ClientWatchesResponse:
    """Every watch's view (in the request's order) once one of them differs from its ``known`` (at once when one
    already does, or has no ``known``), or after ``timeout_s``: one long poll for many clients. A watch refused (403,
    or 404 before its client's first heartbeat) gets its error in its result, and does not end the wait (when every
    one is refused, the answer comes at once).

    With ``since`` (the ``versions`` of the poll's last answer) the views read are only those that may have changed:
    none before the wait when every watched group's version is still current (a process's polls, going again after
    each answer or timeout, read the views of all their clients every time), the woken groups' after it; a watch
    whose view does not differ from its ``known`` is answered 304 alone."""
    state = request.app.state
    changes: GroupChanges = state.group_changes
    deadline = time.monotonic() + body.timeout_s

    refused, allowed = _checked(body.watches, lambda watch: check_client(caller, watch.group, watch.role))
    groups = {watch.group for watch in body.watches}
    read = functools.partial(_read_watches, state, body, caller, refused, allowed)

    metrics: Metrics = state.metrics
    admission: Admission = state.watch_admission
    metrics.watching(+1)
    try:
        fired: set[str] | None = None  # after a wait: the groups whose change ended it
        results: list[ClientHeartbeatResult] = []
        while True:
            events = {group: changes.changed(group) for group in groups}
            versions = {group: changes.version(group) for group in groups}
            if fired is not None:
                results, differs = await _reread_all(state, body, caller, events, read, request, fired, results)
            elif _current(body, allowed, versions):
                results = [_result(refused[i]) if i in refused else NOT_MODIFIED for i in range(len(body.watches))]
                differs = False  # nothing read: each view is what its known says
            else:
                results, differs = await admission.run(read, request)
            remaining = deadline - time.monotonic()
            watched = any(result.status_code < 400 for result in results)  # else nothing to wait for
            if differs or not watched or remaining <= 0 or changes.closing:
                return ClientWatchesResponse(results=results, versions=versions if body.since is not None else None)
            waits = [asyncio.ensure_future(wait_changed(event, remaining)) for event in events.values()]
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for wait in waits:
                    wait.cancel()
            fired = {group for group, event in events.items() if event.is_set()}
    finally:
        metrics.watching(-1)


def _read_watches(state: State, body: ClientWatches, caller: Caller, refused: dict[int, ApiError],
                  allowed: list[int]) -> tuple[list[ClientHeartbeatResult], bool]:
    """Every watch's view, read together (``ClientService.views``), and whether one differs from its known (with
    ``since``, one that does not is 304)."""
    with state.read_sessions() as session:
        views = ClientService(session, state.settings).views([body.watches[i] for i in allowed], caller)
    outcomes = {**refused, **dict(zip(allowed, views, strict=True))}
    results, differs = [], False
    for index, watch in enumerate(body.watches):
        outcome = outcomes[index]
        if isinstance(outcome, ClientHeartbeatResponse):
            result, changed = _watch_result(body, watch, outcome)
            results.append(result)
            differs |= changed
        else:
            results.append(_result(outcome))
    return results, differs


def _current(body: ClientWatches, allowed: list[int], versions: dict[str, str]) -> bool:
    """Whether the views may be taken as their knowns say, unread: every watch has one, and ``since`` names each
    watched group's version now."""
    since = body.since
    return since is not None and bool(allowed) and all(w.known is not None for w in body.watches) and all(
        since.get(group) == version for group, version in versions.items())


async def _reread_all(state: State, body: ClientWatches, caller: Caller, events: dict[str, asyncio.Event],
                      read: Callable[[], tuple[list[ClientHeartbeatResult], bool]], request: Request,
                      fired: set[str], before: list[ClientHeartbeatResult]) -> tuple[list[ClientHeartbeatResult], bool]:
    """After a wake-up: the watches of the ``fired`` groups each from its group's one shared read since ``events``
    were taken, so the batched watches a change wakes cost one read per changed group, not one per client; the
    others' results as ``before`` (nothing changed in their groups since: a wake-up of one group re-read every group
    a process's watches span, fifty at 5,000 clients). ``read`` (each its own, through the watch admission as a
    first read) when a watched client is not in its group's read. With ``since``, a view not differing from its
    known is 304."""
    views: dict[str, GroupViews] = {}
    results, differs = [], False
    for watch, kept in zip(body.watches, before, strict=True):
        if watch.group not in fired:
            results.append(kept)
            continue
        try:
            check_client(caller, watch.group, watch.role)
            if watch.group not in views:
                views[watch.group] = await _group_views(state, watch.group, events[watch.group])
            view = views[watch.group].view(watch, caller)
        except ApiError as refused:
            results.append(ClientHeartbeatResult(status_code=refused.status_code, error=refused.error,
                                                 detail=refused.detail))
            continue
        if view is None:
            admission: Admission = state.watch_admission
            return await admission.run(read, request)
        result, changed = _watch_result(body, watch, view)
        results.append(result)
        differs |= changed
    return results, differs


def _watch_result(body: ClientWatches, watch: ClientWatch, view: ClientHeartbeatResponse
                  ) -> tuple[ClientHeartbeatResult, bool]:
    """A watch's result for ``view`` (304 under ``since`` when it is what its known says) and whether it differs."""
    changed = watch.known is None or _watched(view, watch.known) != watch.known
    return ClientHeartbeatResult(answer=view) if changed or body.since is None else NOT_MODIFIED, changed


@router.delete("/groups/{group}/clients/{client_id}", status_code=status.HTTP_204_NO_CONTENT)
def unregister_client(
    group: GroupPath, client_id: ClientIdPath, caller: Authenticated, clients: Clients, role: Role | None = None
) -> None:
    """A client stopping cleanly leaves its group at once (``role``: that role only, else every role of the id).

    Idempotent (204 whether or not it was registered); audited with the client as actor. Its row stays, so
    an explicit flag given to the client id still applies when a client with that id heartbeats again.
    403 for a live client of another principal (an admin may unregister any client).
    """
    check_client(caller, group, role)
    clients.unregister(group, client_id, role, caller)


# The group's shared read per wake-up event: the watches a change wakes take the same next event, and each
# event's read began after it was taken, so it sees every change the event has not reported yet.
_reads: weakref.WeakKeyDictionary[asyncio.Event, asyncio.Future[GroupViews]] = weakref.WeakKeyDictionary()


async def _group_views(state: State, group: str, changed: asyncio.Event) -> GroupViews:
    read = _reads.get(changed)
    if read is None:
        def views() -> GroupViews:
            with state.read_sessions() as session:
                return ClientService(session, state.settings).group_views(group)

        read = _reads[changed] = asyncio.ensure_future(run_in_threadpool(views))
        read.add_done_callback(lambda done: _forget_failed(changed, done))
    return await asyncio.shield(read)  # a watch that goes away leaves the read to the others


def _forget_failed(changed: asyncio.Event, read: asyncio.Future[GroupViews]) -> None:
    """A failed read is not shared with the watches still to come (they read again)."""
    if read.cancelled() or read.exception() is not None:
        _reads.pop(changed, None)


def _watched(view: ClientHeartbeatResponse, known: WatchedState) -> WatchedState:
    """The watched part of ``view``, compared on what ``known`` holds (its desired lane only when it names one, even
    ``None``: a client that does not know lanes does not wake on them)."""
    return WatchedState(desired_gray=view.desired_gray, gray_switch=view.gray_switch,
                        orphan_policy=view.orphan_policy,
                        gray_weight=None if known.gray_weight is None else view.gray_weight,
                        gray_retired=None if known.gray_retired is None else view.gray_retired,
                        gray_marks=None if known.gray_marks is None else view.gray_marks,
                        lane_marks=None if known.lane_marks is None else view.lane_marks,
                        frozen_lanes=None if known.frozen_lanes is None else view.frozen_lanes,
                        desired_lane=view.desired_lane if "desired_lane" in known.model_fields_set else None,
                        lanes=None if known.lanes is None else view.lanes)
