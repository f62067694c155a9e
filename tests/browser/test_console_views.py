"""The console against a real cluster, with the name server on SQLite and on PostgreSQL: the queue map shows the
owners ``graymq gray status`` reports, a flag flipped in the page drains and flips the client and the audit log
names who did it, and neither the console nor /docs and /redoc fetch anything from outside.

One name server (dev mode, with an admin token named alice so the audit has an actor to name), broker-a, topic
TOPIC_CONSOLE (6 queues, gray 0 and 5), the rule version=v2 → gray, consumers v1a and v2a.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from graymq.devkit.processes import GraymqProcess
from tests.browser.console_page import (
    act,
    beside_the_browser,
    enter_token,
    open_console,
    queue_owners,
    status,
    status_owners,
)
from tests.support.cli import gray_status, produce, start_consumer, wait_for
from tests.support.cluster import Cluster

pytestmark = pytest.mark.e2e
GROUP = "GID_CONSOLE"
TOPIC = "TOPIC_CONSOLE"
ALICE = "alice-console-secret-0123"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def release(request, tmp_path_factory) -> Iterator[Cluster]:  # type: ignore[no-untyped-def]
    """The cluster above on the parameter's database, shared by the module's tests; every process stops at exit."""
    root = tmp_path_factory.mktemp(request.param)
    db_url = f"sqlite:///{root / 'ns.db'}" if request.param == "sqlite" else request.getfixturevalue("pg_url")
    started: list[GraymqProcess] = []

    def start(*args: str, env: dict[str, str] | None = None, wait: bool = True, timeout: float = 30.0
              ) -> GraymqProcess:
        proc = GraymqProcess(args, env=env, cwd=root)
        started.append(proc)
        if wait:
            proc.wait_ready(timeout)
        return proc

    cluster = Cluster(start, db_url, root)
    try:
        cluster.start_nameserver(GRAYMQ_ADMIN_TOKENS=f"alice={ALICE}")
        cluster.add_broker("broker-a")
        beside_the_browser(cluster.create_topic, TOPIC, 6, 2)
        beside_the_browser(cluster.ns_call, lambda ns: ns.add_rule(GROUP, {"version": "v2"}, True))
        for cid in ("v1a", "v2a"):
            start_consumer(start, cluster.ns_url, GROUP, cid, TOPIC, "*", "--label", f"version={cid[:2]}")
        wait_for(lambda: _topic_owners(gray_status(cluster.ns_url, GROUP)) == {
            0: "v2a", 1: "v1a", 2: "v1a", 3: "v1a", 4: "v1a", 5: "v2a"}, 40, "the initial allocation")
        yield cluster
    finally:
        for proc in reversed(started):
            proc.terminate()


def _topic_owners(status_json: dict[str, object]) -> dict[int, str]:
    return {int(q.rsplit(":", 1)[1]): o for q, o in status_owners(status_json).items() if f":{TOPIC}:" in q}


def test_the_queue_map_shows_exactly_the_owners_gray_status_reports(release: Cluster, new_page) -> None:
    ns = release.ns_url
    page = open_console(new_page(), f"{ns}/console/groups/{GROUP}")
    gray = page.eval_on_selector_all(f'[data-queue^="broker-a:{TOPIC}:"]',
                                     "cells => cells.map(c => [c.dataset.queue, c.dataset.gray])")
    assert gray == [[f"broker-a:{TOPIC}:{q}", "true" if q in (0, 5) else "false"] for q in range(6)]

    def same_owners() -> bool:
        shown = {q: owner for q, owner in queue_owners(page).items() if owner}
        return shown == status_owners(gray_status(ns, GROUP))

    wait_for(same_owners, 20, "the page's queue map to show the owners gray status reports")
    groups = open_console(new_page(), f"{ns}/console/")
    row = groups.locator(f'tr[data-group="{GROUP}"]')
    expect(row).to_contain_text("on")
    expect(row.locator(".base-clients")).to_have_text("1")  # v1a
    assert row.locator(".lane-count").evaluate_all("ls => ls.map(l => [l.dataset.lane, l.dataset.clients])") == [
        ["gray", "1"]]  # v2a


def test_flipping_a_flag_in_the_page_drains_and_flips_the_client_and_the_audit_names_the_actor(
    release: Cluster, new_page
) -> None:
    ns = release.ns_url
    produce(ns, TOPIC, "--group", GROUP, "--label", "version=v2", "--count", "30", "--client-id", "producer-v2")
    page = new_page()
    errors: list[str] = []  # script exceptions and what the browser refused (e.g. by the content security policy)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    open_console(page, f"{ns}/console/groups/{GROUP}")
    enter_token(page, ALICE)
    confirmation = act(page, 'tr[data-client="v2a"] button:text-is("normal")', "v2 misbehaves")
    drains = re.fullmatch(r"v2a drains (\d) gray queues, [\d,]+ messages? left, then turns normal and takes normal "
                          r"queues", confirmation)
    assert drains and int(drains[1]) >= 2, confirmation  # TOPIC's two, and its retry topic's once v2a holds them
    assert status(page) == "flag of v2a set: normal"
    v2a = page.locator('tr[data-client="v2a"]')
    expect(v2a).to_have_attribute("data-gray", "false", timeout=30_000)
    expect(v2a).to_have_attribute("data-state", "NORMAL")
    wait_for(lambda: _v2a_cells(page) and all(not q.endswith((":0", ":5")) for q in _v2a_cells(page)), 30,
             "v2a holding normal queues only")
    entry = page.locator('table.audit tr[data-audit-action="set_flag"]').first
    expect(entry.locator(".actor")).to_have_text("alice")
    expect(entry.locator(".reason")).to_have_text("v2 misbehaves")
    assert errors == []

    audit = open_console(new_page(), f"{ns}/console/audit")
    enter_token(audit, ALICE)
    audit.fill("#filters [name=group]", GROUP)
    audit.select_option("#filters [name=object_type]", "client")
    audit.click("#filters button[type=submit]")
    expect(audit.locator('tr[data-object="client:v2a"][data-audit-action="set_flag"] .actor')).to_have_text("alice")
    expect(audit.locator("table.audit tbody tr:not([data-object^='client:'])")).to_have_count(0)


def _v2a_cells(page) -> list[str]:  # type: ignore[no-untyped-def]
    return [q for q, owner in queue_owners(page).items() if owner == "v2a" and f":{TOPIC}:" in q]


def test_the_console_and_the_api_docs_work_offline(release: Cluster, new_page) -> None:
    """Every request leaving the name server is refused, as on a machine without internet; the pages still render
    and none of their scripts, styles or fonts came from outside (Redoc's "powered by" logo, an image, is the one
    thing it asks a CDN for)."""
    ns = release.ns_url
    page = new_page()
    outside: list[tuple[str, str]] = []

    def offline(route) -> None:  # type: ignore[no-untyped-def]
        if route.request.url.startswith(ns):
            route.continue_()
        else:
            outside.append((route.request.resource_type, route.request.url))
            route.abort()

    page.route(re.compile(r"^https?://"), offline)
    page.goto(f"{ns}/docs")
    # both pages lay out the whole OpenAPI document in the browser: seconds on a busy two-core machine
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("graymq name server", timeout=30_000)
    page.goto(f"{ns}/redoc")
    expect(page.locator("h1").first).to_contain_text("graymq name server", timeout=30_000)
    open_console(page, f"{ns}/console/operations")
    assert [url for kind, url in outside if kind != "image"] == []
