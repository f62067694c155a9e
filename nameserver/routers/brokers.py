"""Broker registration and its watch (a broker right is needed), and the live broker list."""

from __future__ import annotations

import time

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from graymq.nameserver.auth import BrokerCaller, Caller, check_broker
from graymq.nameserver.deps import RefusedDep, Registry, ReplicaSets, SettingsDep
from graymq.nameserver.errors import Forbidden
from graymq.nameserver.refused_registrations import RefusedRegistrations
from graymq.nameserver.schemas import (
    BrokerHeartbeat,
    BrokerHeartbeatResponse,
    BrokerUnregister,
    BrokerUnregisterResponse,
    BrokerView,
    BrokerWatch,
    BrokerWatchResponse,
    ReplicaHeartbeat,
    ReplicaSetView,
)
from graymq.nameserver.services.registry import RegistryService
from graymq.nameserver.services.route_lease import broker_lease_s
from graymq.nameserver.watch import TOPIC_TABLE_CHANGED, GroupChanges, wait_changed

router = APIRouter(prefix="/v1/brokers", tags=["brokers"])


@router.post("/heartbeat")
def broker_heartbeat(body: BrokerHeartbeat, caller: BrokerCaller, registry: Registry, settings: SettingsDep,
                     refused: RefusedDep) -> BrokerHeartbeatResponse:
    """Register or renew a broker with its topics (403 for a broker name, or replica id, the caller's broker right
    does not cover); answers with every configured topic and the deletions the broker has not applied yet. Topics
    the broker reports that are not configured are recorded only for an admin caller (or in dev mode); a broker
    token gets routes for configured topics and its groups' retry and dead-letter topics. A refusal is remembered
    for the routes to show (``RefusedRegistrations``) until that broker (replica) registers."""
    _check_remembered(caller, body.broker_name, body.replica_id, refused, broker_lease_s(settings,
                                                                                        body.register_interval_s))
    answer = registry.heartbeat(body, may_create_topics=caller.rights.admin or settings.dev_mode)
    refused.registered(body.broker_name, body.replica_id)
    return answer


@router.post("/unregister")
def broker_unregister(body: BrokerUnregister, caller: BrokerCaller, registry: Registry) -> BrokerUnregisterResponse:
    """A broker stopping cleanly leaves the routes at once (403 for a broker name, or replica id, the caller's broker
    right does not cover); a killed one leaves them when its lease runs out, a few registration intervals later."""
    check_broker(caller, body.broker_name, body.replica_id)
    return registry.unregister(body)


@router.post("/replicas/heartbeat")
def replica_heartbeat(body: ReplicaHeartbeat, caller: BrokerCaller, sets: ReplicaSets, settings: SettingsDep,
                      refused: RefusedDep) -> ReplicaSetView:
    """A replica of a broker set reports itself (epoch, log end; the leader its in-sync proposal; 403 for a broker
    name or replica id the caller's broker right does not cover); answers who
    leads the set under which epoch, from which offset, and who is in sync. Renews the leader's lease; elects an
    in-sync follower once it expired (see the replica-set rules in the README's Replication section)."""
    _check_remembered(caller, body.broker_name, body.replica_id, refused, broker_lease_s(settings, None))
    view = sets.heartbeat(body)
    refused.registered(body.broker_name, body.replica_id)
    return view


def _check_remembered(caller: Caller, broker_name: str, replica_id: int | None, refused: RefusedRegistrations,
                      keep_s: float) -> None:
    """``check_broker``, its refusal remembered for ``keep_s``."""
    try:
        check_broker(caller, broker_name, replica_id)
    except Forbidden as refusal:
        refused.refused(broker_name, replica_id, str(refusal.detail), keep_s)
        raise


@router.post("/watch")
async def broker_watch(body: BrokerWatch, _caller: BrokerCaller, request: Request) -> BrokerWatchResponse:
    """The current ``topics_version`` once it differs from the broker's (at once when it already does, or
    ``topics_version`` is absent), or after ``timeout_s``: a broker registers again when it changed, so a
    topic created or deleted reaches it without waiting for its next registration."""
    state = request.app.state
    changes: GroupChanges = state.group_changes
    deadline = time.monotonic() + body.timeout_s

    def read() -> str:
        with state.read_sessions() as session:
            return RegistryService(session, state.settings).topics_version()

    while True:
        changed = changes.changed(TOPIC_TABLE_CHANGED)
        version = await run_in_threadpool(read)
        remaining = deadline - time.monotonic()
        if version != body.topics_version or remaining <= 0 or changes.closing:
            return BrokerWatchResponse(topics_version=version)
        await wait_changed(changed, remaining)


@router.get("")
def list_brokers(registry: Registry) -> list[BrokerView]:
    """Brokers whose lease has not expired."""
    return registry.live_brokers()
