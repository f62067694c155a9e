"""Seeing a release as it happens in the console: per-side charts that move while messages flow, an audit table
that says what changed (before → after), and a rollout started from the page that shows its steps advancing and
rolls back when aborted.

One name server in dev mode (SQLite, a health point every second), broker-a, topic TOPIC_RELEASE (8 queues, gray
0 and 7), the rule version=v2 → gray; each test starts its own group's consumers (v1 normal, v2 gray by the rule)
and a v1 producer sending throughout.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

import pytest
from playwright.sync_api import Page, expect

from graymq.devkit.processes import GraymqProcess
from tests.browser.console_page import beside_the_browser, open_console
from tests.support.cli import gray_status, graymq, start_consumer, wait_for
from tests.support.cluster import Cluster, module_processes

pytestmark = pytest.mark.e2e
TOPIC = "TOPIC_RELEASE"
FAST_RETRIES = ",".join(["0.2"] * 18)  # delay levels: a failed message comes back 0.2 s later


class Release(NamedTuple):
    cluster: Cluster
    start: Callable[..., GraymqProcess]  # stopped with the module


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Iterator[Release]:  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("release")
    with module_processes(root) as start:
        cluster = Cluster(start, f"sqlite:///{root / 'ns.db'}", root)
        cluster.start_nameserver(GRAYMQ_HEALTH_SAMPLE_SECONDS="1")
        cluster.add_broker("broker-a", GRAYMQ_BROKER_DELAY_LEVELS_S=FAST_RETRIES)
        beside_the_browser(cluster.create_topic, TOPIC, 8, 2)
        yield Release(cluster, start)


def start_group(release: Release, group: str, *v2_args: str) -> None:
    """v1a (normal) and v2a (gray by the rule version=v2) consuming TOPIC in ``group``, a v1 producer sending."""
    ns = release.cluster.ns_url
    beside_the_browser(release.cluster.ns_call, lambda client: client.add_rule(group, {"version": "v2"}, True))
    for cid in ("v1a", "v2a"):
        start_consumer(release.start, ns, group, cid, TOPIC, "*", "--label", f"version={cid[:2]}",
                       *(v2_args if cid == "v2a" else ()))
    wait_for(lambda: all(c["queues"] for c in gray_status(ns, group)["clients"]), 40, "both consumers holding queues")
    release.start("produce", TOPIC, "--group", group, "--label", "version=v1", "--count", "20000", "--size", "32",
                  "--interval", "0.01", "--nameserver", ns, wait=False)


def chart_value(page: Page, metric: str, side: str) -> float:
    text = page.locator(f'#health figure[data-metric="{metric}"]').get_attribute(f"data-{side}") or "0"
    return float(text)


def test_the_group_page_charts_each_sides_throughput_failure_rate_and_p99_while_messages_flow(
    release: Release, new_page
) -> None:
    ns = release.cluster.ns_url
    start_group(release, "G_CHARTS", "--fail-rate", "0.5")
    graymq(ns, "gray", "weight", "G_CHARTS", "50")  # v2a takes half the normal queues: the v1 producer's messages
    page = new_page()
    errors: list[str] = []  # script errors and what the content security policy refused
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    open_console(page, f"{ns}/console/groups/G_CHARTS")
    expect(page.locator("#health")).to_be_visible()
    wait_for(lambda: chart_value(page, "per_second", "normal") > 0 and chart_value(page, "per_second", "gray") > 0,
             30, "both sides' throughput above 0")
    wait_for(lambda: chart_value(page, "failure_rate", "gray") > 10, 30, "the gray side's failures charted")
    assert chart_value(page, "failure_rate", "normal") == 0
    assert chart_value(page, "p99_ms", "normal") > 0
    for metric in ("per_second", "failure_rate", "p99_ms"):
        figure = page.locator(f'#health figure[data-metric="{metric}"]')
        expect(figure.locator("polyline.series.gray")).to_have_count(1)
        expect(figure.locator("polyline.series.normal")).to_have_count(1)
    points = int(page.locator('#health figure[data-metric="per_second"]').get_attribute("data-points") or 0)
    wait_for(lambda: int(page.locator('#health figure[data-metric="per_second"]').get_attribute("data-points") or 0)
             > points, 10, "a new point drawn")
    assert errors == []


def test_the_audit_table_shows_what_changed_before_and_after(release: Release, new_page) -> None:
    ns = release.cluster.ns_url
    graymq(ns, "gray", "switch", "G_AUDIT", "on")
    graymq(ns, "gray", "weight", "G_AUDIT", "30", "--reason", "more traffic to v2")
    page = open_console(new_page(), f"{ns}/console/audit")
    entry = page.locator('tr[data-object="group:G_AUDIT"][data-audit-action="set_weight"]')
    expect(entry.locator('.change[data-field="gray_weight"]')).to_have_text("gray_weight: 0 → 30")
    expect(entry.locator(".change del")).to_have_text("0")
    expect(entry.locator(".change ins")).to_have_text("30")
    expect(entry.locator(".reason")).to_have_text("more traffic to v2")
    raw = entry.locator("details.raw pre")
    expect(raw).to_be_hidden()  # the raw JSON only behind the toggle
    entry.locator("details.raw summary").click()
    expect(raw).to_contain_text('after: {"gray_weight": 30}')
