"""Shared fixtures: a real PostgreSQL for the session, a fresh database per module, graymq processes."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from graymq.devkit.processes import GraymqProcess

# Property tests assert what the code does, never how fast: Hypothesis's default 200 ms deadline per example failed
# them on a loaded machine (the unit suite beside the full suite, CI at load 30+) as "flaky".
settings.register_profile("graymq", deadline=None, print_blob=True)
settings.load_profile("graymq")

# Functional tests run name servers and brokers in dev mode (authentication off); the trust tests start
# theirs with GRAYMQ_DEV_MODE=false and real principals.
os.environ.setdefault("GRAYMQ_DEV_MODE", "true")
# Every broker a test starts preallocates commit-log segments of 64 MiB, not the production 1 GiB: a test stores a
# few MiB, and a run keeps its brokers' stores (pytest keeps the last three runs). A test that rolls segments or
# checks their size passes --segment-size itself, which wins over this.
os.environ.setdefault("GRAYMQ_BROKER_SEGMENT_SIZE", str(64 << 20))
# The CLI waits up to 60 s for a name server still coming up (gray_controller/cli/cluster_wait.py): the tests start
# theirs and wait for it, and those pointing at a dead address check the error, not the wait (its own tests set it).
os.environ.setdefault("GRAYMQ_NAMESERVER_WAIT_S", "0")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Groups for pytest-xdist's ``--dist loadgroup`` (``make test``): a group's tests run on one worker, one after
    the other. A test marked ``xdist_group`` keeps its group (the README's fixed ports); every other Spark test joins
    ``spark``, so one worker holds the session's JVM (``local[2]``) and no two Spark jobs compete for the cores (those
    running Spark in a process of their own are marked ``spark_processes``: one at a time beside the session); the
    chaos cases join ``chaos``, so no fault's load overlaps another's; the tests of a module with a module-scoped
    fixture (a cluster, a database, a browser) join their module's group, so it starts once, not on every worker.
    Without xdist the marks change nothing."""
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        if group := next((name for name in ("spark", "chaos") if item.get_closest_marker(name)), None):
            item.add_marker(pytest.mark.xdist_group(group))
        elif _uses_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


def _uses_module_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    return info is not None and any(defs[-1].scope == "module" for defs in info.name2fixturedefs.values())


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The chaos table of the cases that ran, from their reports: here, not in tests/chaos/conftest.py, which a
    pytest-xdist controller never loads (it collects nothing; its workers run the cases)."""
    from tests.chaos.report import format_table, reported_results

    reports = [r for rs in terminalreporter.stats.values() for r in rs if isinstance(r, pytest.TestReport)]
    if results := reported_results(reports):
        terminalreporter.section("chaos")
        terminalreporter.write_line(format_table(results))


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
