"""The operators' web console, served by the name server at ``/console/`` (README "Console").

Pages are server-rendered fragments (Jinja2) that a small script fetches and refreshes; every asset ships in this
package, nothing comes from a CDN.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from graymq.nameserver.console.drain import DrainWatch
from graymq.nameserver.console.operations import ConsoleOperations
from graymq.nameserver.console.rollouts import ConsoleRollouts
from graymq.nameserver.console.routes import data, pages
from graymq.nameserver.services.health_history import HealthHistory, HealthSampler, LiveReports

STATIC = Path(__file__).parent / "static"


def mount_console(app: FastAPI) -> None:
    """Add the console's routes and assets to ``app``; the cutovers and rollouts it runs and its health sampler stop
    with the app."""
    operations = ConsoleOperations()
    app.state.console_operations = operations
    app.state.console_drains = DrainWatch()
    rollouts = ConsoleRollouts()
    app.state.console_rollouts = rollouts
    settings = app.state.settings
    app.state.health_history = HealthHistory(settings.health_sample_seconds)

    live_reports = LiveReports(settings.client_expiry_seconds)

    def read_reports() -> dict[str, dict[str, Any]]:
        with app.state.read_sessions() as session:
            return live_reports(session)

    sampler = HealthSampler(app.state.health_history, read_reports)
    app.include_router(pages)
    app.include_router(data)
    app.mount("/console/static", StaticFiles(directory=STATIC), name="console-static")
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(running: FastAPI) -> AsyncIterator[Any]:
        async with inner(running) as state:
            sampler.start()
            try:
                yield state
            finally:
                await sampler.stop()
                await operations.stop()

    app.router.lifespan_context = lifespan
