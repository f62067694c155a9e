"""Liveness, readiness and Prometheus metrics (outside ``/v1``: they are for the platform, not clients)."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse

from graymq.nameserver.db import DB_UNAVAILABLE_ERRORS, describe_db_error
from graymq.nameserver.deps import Health
from graymq.nameserver.metrics import Metrics

log = logging.getLogger(__name__)
router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is up (does not touch the database)."""
    return {"status": "ok"}


@router.get("/readyz")
def readyz(health: Health) -> dict[str, str]:
    """The database answers ``SELECT 1``; 503 otherwise."""
    health.check_database()
    return {"status": "ready"}


@router.get("/metrics", response_class=PlainTextResponse)
def metrics(request: Request, health: Health) -> PlainTextResponse:
    counters: Metrics = request.app.state.metrics
    try:
        live_brokers, live_clients = health.live_brokers(), health.live_clients()
        consumer_health, group_releases = health.consumer_health(), health.group_releases()
    except DB_UNAVAILABLE_ERRORS as exc:
        counters.db_error()
        log.warning("metrics without cluster gauges, database unavailable: %s", describe_db_error(exc))
        live_brokers, live_clients, consumer_health, group_releases = None, None, None, None
    return PlainTextResponse(
        counters.render(live_brokers, live_clients, consumer_health, group_releases),
        media_type="text/plain; version=0.0.4",
    )
