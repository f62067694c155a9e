"""Seeing a release as it happens in the console: per-side charts that move while messages flow, an audit table
that says what changed (before → after), and a rollout started from the page that shows its steps advancing and
rolls back when aborted.

One name server in dev mode (SQLite, a health point every second), broker-a, topic TOPIC_RELEASE (8 queues, gray
0 and 7), the rule version=v2 → gray; each test starts its own group's consumers (v1 normal, v2 gray by the rule)
and a v1 producer sending throughout.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import NamedTuple

import pytest
from playwright.sync_api import Page, expect

from graymq.devkit.processes import GraymqProcess
from tests.browser.console_page import act, beside_the_browser, open_console, status
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

    group = open_console(new_page(), f"{ns}/console/groups/G_AUDIT")  # refreshed every second
    opened = group.locator('table.audit tr[data-audit-action="set_weight"] details.raw')
    opened.locator("summary").click()
    refreshed = int(group.locator("#content").get_attribute("data-refreshed") or 0)
    wait_for(lambda: int(group.locator("#content").get_attribute("data-refreshed") or 0) > refreshed + 2, 20,
             "the page refreshed (its times changed)")
    assert opened.evaluate("node => node.open")  # the toggle stays open


def test_a_rollout_started_from_the_console_shows_its_steps_advancing_and_an_abort_rolls_back(
    release: Release, new_page
) -> None:
    ns = release.cluster.ns_url
    start_group(release, "G_ROLLOUT")
    page = open_console(new_page(), f"{ns}/console/groups/G_ROLLOUT")
    form = page.locator("#rollout-form")
    expect(form.locator("[name=max_failure_rate]")).to_have_value("5")  # the CLI's defaults
    expect(form.locator("[name=min_messages]")).to_have_value("10")
    form.locator("[name=steps]").fill("0,150")
    form.locator("[name=step_seconds]").fill("2")
    assert act(page, "#rollout-start", "") == ""  # refused before any confirmation, nothing started
    expect(page.locator("#status")).to_have_text(
        "refused: 400 --steps must be weights from 1 to 100, got [0, 150]")
    form.locator("[name=steps]").fill("10,20,30,40")
    form.locator("[name=step_seconds]").fill("100000")  # more than a day
    assert act(page, "#rollout-start", "") == ""
    expect(page.locator("#status")).to_have_text(
        "refused: 422 invalid request: step_seconds: Input should be less than or equal to 86400")

    form.locator("[name=step_seconds]").fill("2")
    form.locator("[name=min_messages]").fill("5")
    form.locator("[name=timeout_s]").fill("60")
    confirmation = act(page, "#rollout-start", "canary of v2")
    assert confirmation.startswith("rolls G_ROLLOUT out at weights 10% → 20% → 30% → 40%, 2 s each; each step passes "
                                   "with ≥ 5 gray deliveries, gray failure rate ≤ max(5%, normal + 5 points)"), \
        confirmation
    assert re.fullmatch(r"rollout #\d+ of G_ROLLOUT started .*", status(page)), status(page)
    operation = page.locator('article.operation[data-state="RUNNING"]')
    steps = operation.locator(".rollout-steps li")
    expect(steps).to_have_count(4)
    expect(steps.nth(0)).to_have_attribute("data-status", "checking")
    expect(steps.nth(0)).to_have_attribute("data-status", "passed", timeout=30_000)
    expect(steps.nth(1)).to_have_attribute("data-status", "checking")
    expect(operation.locator('table.checks tr[data-check="1"]')).to_have_attribute("data-verdict", "pass")
    expect(operation.locator('table.checks tr[data-check="1"] td').nth(3)).to_contain_text("(≤ 5.0%)")
    wait_for(lambda: chart_value(page, "per_second", "gray") > 0, 20, "the gray side's throughput charted")

    act(page, "article.operation button.abort", "v2 looks wrong")
    assert re.fullmatch(r"rollout #\d+ of G_ROLLOUT aborted: rolling back .*", status(page)), status(page)
    ended = page.locator('article.operation[data-state="ABORTED"]').first
    expect(ended.locator(".state")).to_have_text("ROLLED BACK", timeout=40_000)
    expect(ended).to_contain_text("aborted from the console by dev")
    assert "checking" not in ended.locator(".rollout-steps li").evaluate_all("s => s.map(li => li.dataset.status)")
    expect(ended.locator('.rollout-steps li[data-status="aborted"]')).to_have_count(1)
    expect(page.locator("section.summary")).to_have_attribute("data-weight", "0")
    v2a = next(c for c in gray_status(ns, "G_ROLLOUT")["clients"] if c["client_id"] == "v2a")
    assert (v2a["state"], v2a["queues"]) == ("RETIRED", [])
    entry = page.locator('table.audit tr[data-audit-action="abort"]')
    expect(entry.locator(".reason")).to_have_text("v2 looks wrong")
    expect(entry.locator(".actor")).to_have_text("dev")
