"""The FastAPI application: routers, error handlers, request metrics, and the database engine's lifetime."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version

from fastapi import Depends, FastAPI
from fastapi_offline import FastAPIOffline
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from graymq.nameserver.admission import Admission
from graymq.nameserver.auth import authenticated
from graymq.nameserver.body_limit import BodyLimitMiddleware
from graymq.nameserver.console import mount_console
from graymq.nameserver.db import create_db_engine, read_only, session_factory
from graymq.nameserver.errors import install_error_handlers
from graymq.nameserver.metrics import Metrics
from graymq.nameserver.refused_registrations import RefusedRegistrations
from graymq.nameserver.route_views import RouteViews
from graymq.nameserver.routers import audit, brokers, clients, cutovers, groups, health, lanes, principals, topics
from graymq.nameserver.schemas import ErrorBody
from graymq.nameserver.settings import NameServerSettings
from graymq.nameserver.watch import GroupChanges
from graymq.protocol.throttle import FailedAuthThrottle

log = logging.getLogger(__name__)

# Error answers every /v1 route may give (all errors share the ErrorBody shape).
ERROR_RESPONSES: dict[int | str, dict[str, object]] = {
    401: {"model": ErrorBody, "description": "`UNAUTHORIZED`: no valid bearer token"},
    403: {"model": ErrorBody, "description": "`FORBIDDEN`: the token's principal lacks the right `detail` names"},
    413: {"model": ErrorBody, "description": "the request body exceeds GRAYMQ_MAX_BODY_BYTES"},
    429: {"model": ErrorBody, "description": "too many failed authentications from this address (see Retry-After)"},
    422: {"model": ErrorBody, "description": "invalid request: `detail` lists the fields and what is wrong"},
    503: {"model": ErrorBody, "description": "database unavailable: `detail` is the cause"},
}


class RequestMetricsMiddleware:
    """Counts every HTTP request by method, route template (not raw path) and status."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500

        async def send_and_record(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_record)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            self.metrics.request(scope["method"], template, status)


def _version() -> str:
    try:
        return version("graymq")
    except PackageNotFoundError:
        return "unknown"


def create_app(settings: NameServerSettings) -> FastAPI:
    """Build the name server; refuses (``InsecureConfigError``) an admin token setup unsafe to serve."""
    token_actors = settings.token_actors()
    broker_token_actors = settings.broker_token_actors()
    if settings.dev_mode:
        log.warning("dev mode: authentication is off, every caller may do anything (never use it in production)")
    engine = create_db_engine(settings.db_url)
    metrics = Metrics()

    sessions = session_factory(engine)
    postgres = engine.dialect.name == "postgresql"
    changes = GroupChanges()
    changes.install(sessions, postgres)
    route_views = RouteViews()
    changes.subscribe(route_views.changed)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        changes.bind(asyncio.get_running_loop())
        listening = asyncio.create_task(changes.listen(settings.db_url)) if postgres else None
        try:
            yield
        finally:
            changes.close()
            if listening is not None:
                listening.cancel()
                await asyncio.gather(listening, return_exceptions=True)
            engine.dispose()

    app = FastAPIOffline(  # /docs and /redoc from the assets fastapi-offline ships, no CDN
        title="graymq name server",
        version=_version(),
        description="Broker registry, topic routes, per-client grayFlags, gray switches and rules, "
        "cutover records and the audit log. Every `/v1` call needs `Authorization: Bearer <token>` (a principal's "
        "token, or an admin token) outside dev mode; health checks and metrics are open.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.engine = engine
    app.state.sessions = sessions
    app.state.read_sessions = session_factory(read_only(engine))
    app.state.group_changes = changes
    app.state.route_views = route_views
    # heartbeats and watch reads take turns apart: a burst of one does not starve the other
    app.state.heartbeat_admission = Admission(settings.heartbeat_concurrency, settings.heartbeat_queue_seconds)
    app.state.watch_admission = Admission(settings.heartbeat_concurrency, settings.heartbeat_queue_seconds)
    app.state.refused_registrations = RefusedRegistrations()
    app.state.token_actors = token_actors
    app.state.broker_token_actors = broker_token_actors
    app.state.metrics = metrics
    app.state.auth_throttle = FailedAuthThrottle(settings.auth_failure_limit, settings.auth_failure_window_s)
    install_error_handlers(app, metrics)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(RequestMetricsMiddleware, metrics=metrics)
    for router in (*(m.router for m in (brokers, topics, clients, groups, lanes, cutovers, audit, principals)),
                   topics.routes_router):
        app.include_router(router, responses=ERROR_RESPONSES, dependencies=[Depends(authenticated)])
    app.include_router(health.router)
    mount_console(app)
    return app
