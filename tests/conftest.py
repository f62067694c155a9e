"""Shared fixtures: a real PostgreSQL for the session, a fresh database per module, graymq processes."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from graymq.devkit.processes import GraymqProcess

# Functional tests run name servers and brokers in dev mode (authentication off); the trust tests start
# theirs with GRAYMQ_DEV_MODE=false and real principals.
os.environ.setdefault("GRAYMQ_DEV_MODE", "true")


@pytest.fixture(scope="session")
def postgres() -> Iterator[object]:
    """A PostgreSQL server started from the machine's binaries, torn down at the end."""
    from graymq.devkit.postgres import PostgresServer

    server = PostgresServer()
    server.start()
    try:
        yield server
    finally:
        server.destroy()


@pytest.fixture(scope="module")
def pg_url(postgres, request) -> str:  # type: ignore[no-untyped-def]
    """SQLAlchemy URL of a database created fresh for the calling test module."""
    name = "t_" + re.sub(r"[^a-z0-9_]", "_", request.module.__name__.lower())[-50:]
    return str(postgres.create_database(name))


@pytest.fixture
def graymq_process(tmp_path: Path) -> Iterator[Callable[..., GraymqProcess]]:
    """Factory that starts ``graymq <args>`` and stops every process it started at teardown."""
    started: list[GraymqProcess] = []

    def start(*args: str, env: dict[str, str] | None = None, wait: bool = True, timeout: float = 60.0) -> GraymqProcess:
        proc = GraymqProcess(args, env=env, cwd=tmp_path)
        started.append(proc)
        if wait:
            proc.wait_ready(timeout)
        return proc

    yield start
    for proc in reversed(started):
        proc.terminate()


@pytest.fixture
def fresh_pg_url(postgres) -> str:  # type: ignore[no-untyped-def]
    """A brand-new database for one test."""
    import uuid

    return str(postgres.create_database(f"t_{uuid.uuid4().hex[:12]}"))


@pytest.fixture
def cluster(graymq_process, fresh_pg_url, tmp_path):  # type: ignore[no-untyped-def]
    """A name server on a fresh Postgres database; add brokers with ``cluster.add_broker(name)``."""
    from tests.support.cluster import Cluster

    c = Cluster(graymq_process, fresh_pg_url, tmp_path)
    c.start_nameserver()
    return c
