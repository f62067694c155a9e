"""A group page at a fleet's size: the client table shows a page of 50 with links to the others, and the counts
per role and side above it cover every client. One name server in dev mode (SQLite), no broker: 130 consumers (20
gray, 10 in lane v2) and 7 producers registered through one batched heartbeat, which stays live for the module (a
loaded machine took longer than the suite's usual 15 s of client expiry to page through them)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.browser.console_page import open_console
from tests.support.cluster import Cluster, module_processes

pytestmark = pytest.mark.e2e
GROUP = "G_PAGES"
CONSUMERS, GRAY, V2, PRODUCERS = 130, 20, 10, 7


@pytest.fixture(scope="module")
def ns_url(tmp_path_factory) -> Iterator[str]:  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("pages")
    with module_processes(root) as start:
        cluster = Cluster(start, f"sqlite:///{root / 'ns.db'}", root)
        cluster.start_nameserver(GRAYMQ_CLIENT_EXPIRY_SECONDS="3600", GRAYMQ_CLIENT_STALE_SECONDS="3600")
        beats = [{"group": GROUP, "client_id": f"c-{i:03d}", "role": "consumer", "gray": i < GRAY + V2,
                  "lane": "v2" if i >= GRAY and i < GRAY + V2 else None, "state": "GRAY" if i < GRAY + V2 else "NORMAL"}
                 for i in range(CONSUMERS)]
        beats += [{"group": GROUP, "client_id": f"p-{i:03d}", "role": "producer"} for i in range(PRODUCERS)]
        answer = httpx.post(f"{cluster.ns_url}/v1/clients/heartbeats", json={"heartbeats": beats}, timeout=30)
        assert answer.status_code == 200, answer.text
        yield cluster.ns_url


def table_clients(page: Page) -> list[str]:
    return page.eval_on_selector_all("table.clients tbody tr[data-client]", "rows => rows.map(r => r.dataset.client)")


def test_the_client_table_pages_through_every_client_and_the_counts_cover_them_all(ns_url: str, new_page) -> None:
    page = open_console(new_page(), f"{ns_url}/console/groups/{GROUP}")
    counts = page.locator("#client-counts")
    expect(counts).to_have_attribute("data-total", str(CONSUMERS + PRODUCERS))
    shown = {(c["role"], c["lane"]): int(c["count"]) for c in page.eval_on_selector_all(
        ".client-count", "spans => spans.map(s => ({...s.dataset}))")}
    assert shown == {("consumer", ""): CONSUMERS - GRAY - V2, ("consumer", "gray"): GRAY, ("consumer", "v2"): V2,
                     ("producer", ""): PRODUCERS}
    assert table_clients(page) == [f"c-{i:03d}" for i in range(50)]
    nav = page.locator("#client-pages")
    expect(nav).to_have_attribute("data-pages", "3")
    expect(nav).to_contain_text("clients 1–50 of 137, page 1 of 3")

    page.click("#client-pages a.next")
    expect(nav).to_have_attribute("data-page", "2")
    assert table_clients(page) == [f"c-{i:03d}" for i in range(50, 100)]
    assert page.url.endswith("#clients=2")

    page.click("#client-pages a.last")
    expect(nav).to_have_attribute("data-page", "3")
    assert table_clients(page) == [f"c-{i:03d}" for i in range(100, CONSUMERS)] + [
        f"p-{i:03d}" for i in range(PRODUCERS)]
    expect(counts).to_have_attribute("data-total", str(CONSUMERS + PRODUCERS))  # the counts do not page
    content = page.locator("#content")
    for _ in range(2):  # the page refreshes on its own and keeps the page asked for
        expect(content).not_to_have_attribute("data-refreshed", content.get_attribute("data-refreshed") or "")
    expect(nav).to_have_attribute("data-page", "3")

    page.click("#client-pages a.first")
    expect(nav).to_have_attribute("data-page", "1")
    assert table_clients(page)[0] == "c-000"
