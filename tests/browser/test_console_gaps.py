"""What an operator missed in the console: the header says dev mode, an unknown group's page offers no promote or
rollback, queue cells label their figures, rules carry the numbers the CLI prints, a running operation shows its
drain progress, a rollout that rolled back is not shown as a failure, and a broker that does not answer is marked
while the others' figures stay.

One name server in dev mode (SQLite; a killed broker stays routed for a minute), broker-a and broker-b, topic
TOPIC_GAPS (4 queues, gray 0 and 3 on each broker).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import pytest
from playwright.sync_api import expect

from graymq.devkit.processes import GraymqProcess
from tests.browser.console_page import beside_the_browser, open_console
from tests.support.cli import graymq, produce, start_consumer
from tests.support.cluster import Cluster, module_processes

pytestmark = pytest.mark.e2e
TOPIC = "TOPIC_GAPS"
BAD = "rgb(179, 38, 30)"  # the console's --bad colour: failures


class Gaps(NamedTuple):
    cluster: Cluster
    start: Callable[..., GraymqProcess]  # for the CLI helpers: stopped with the module


@pytest.fixture(scope="module")
def gaps(tmp_path_factory) -> Iterator[Gaps]:  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("gaps")
    with module_processes(root) as start:
        cluster = Cluster(start, f"sqlite:///{root / 'ns.db'}", root)
        cluster.start_nameserver(GRAYMQ_BROKER_LEASE_MIN_SECONDS="60")
        cluster.add_broker("broker-a")
        cluster.add_broker("broker-b")
        beside_the_browser(cluster.create_topic, TOPIC, 4, 2)
        yield Gaps(cluster, start)


def record(cluster: Cluster, group: str, kind: str, mode: str, **patch: Any) -> int:
    """An operation record as a controller writes it (started, then patched with ``patch``); its id."""
    async def go(ns) -> int:  # type: ignore[no-untyped-def]
        op = await ns.start_cutover(group, kind, mode, [group])
        if patch:
            await ns.update_cutover(op.id, **patch)
        return op.id

    return int(beside_the_browser(cluster.ns_call, go))


def test_the_header_says_dev_mode(gaps: Gaps, new_page) -> None:
    cluster = gaps.cluster
    page = open_console(new_page(), f"{cluster.ns_url}/console/")
    expect(page.locator("#dev-mode")).to_have_text("dev mode: authentication off")
    expect(page.locator("#token-state")).to_have_text("no token needed")


def test_an_unknown_groups_page_offers_no_promote_or_rollback(gaps: Gaps, new_page) -> None:
    cluster = gaps.cluster
    graymq(cluster.ns_url, "gray", "switch", "G_KNOWN", "on")
    known = open_console(new_page(), f"{cluster.ns_url}/console/groups/G_KNOWN")
    expect(known.locator("#promote")).to_be_visible()
    expect(known.locator("#rollback-drain")).to_be_visible()

    unknown = new_page()
    unknown.goto(f"{cluster.ns_url}/console/groups/G_NEVER_SEEN")  # its fragment answers 404: never "refreshed"
    expect(unknown.locator("#content")).to_contain_text("404")
    expect(unknown.locator("#content")).to_contain_text("G_NEVER_SEEN")
    for control in ("#promote", "#rollback-drain", "#rollback-adopt"):
        expect(unknown.locator(control)).to_be_hidden()


def test_rules_carry_the_numbers_the_cli_prints_and_cells_label_their_figures(gaps: Gaps, new_page) -> None:
    cluster = gaps.cluster
    ns = cluster.ns_url
    printed = [graymq(ns, "gray", "rule", "G_RULES", "--label", f"version={v}", "on").stdout for v in ("v7", "v8")]
    ids = [int(re.search(r"rule #(\d+) of G_RULES", text)[1]) for text in printed]  # type: ignore[index]
    graymq(ns, "gray", "rule", "G_RULES", "--label", "version=v7", "off")
    start_consumer(gaps.start, ns, "G_RULES", "c1", TOPIC)
    page = open_console(new_page(), f"{ns}/console/groups/G_RULES")
    expect(page.locator("table.rules tbody tr")).to_have_count(1)
    expect(page.locator(f'tr[data-rule="{ids[1]}"] td').first).to_have_text(f"#{ids[1]}")

    cell = page.locator(f'[data-queue="broker-a:{TOPIC}:1"]')
    expect(cell.locator(".offsets")).to_have_text([re.compile(r"^committed -?[\d,]+$"), re.compile(r"^max [\d,]+$")])


def test_a_running_operation_shows_its_drain_progress(gaps: Gaps, new_page) -> None:
    cluster = gaps.cluster
    ns = cluster.ns_url
    start = gaps.start
    graymq(ns, "gray", "switch", "G_DRAIN", "on")
    start_consumer(start, ns, "G_DRAIN", "normal-1", TOPIC)  # normal: the gray queues keep what is sent there
    produce(ns, TOPIC, "--gray", "--count", "6")
    operation = record(cluster, "G_DRAIN", "promote", "drain", step="drain")
    page = open_console(new_page(), f"{ns}/console/groups/G_DRAIN")
    progress = page.locator("#drain-progress")
    expect(progress).to_have_attribute("data-left", "6")
    expect(progress).to_contain_text("0 of 6 gray messages consumed (0 %), 6 left, 0 gray consumers still gray")

    start_consumer(start, ns, "G_DRAIN", "gray-1", TOPIC, "*", "--gray")  # consumes the gray queues dry
    expect(progress).to_have_attribute("data-left", "0", timeout=30_000)
    expect(progress).to_contain_text("6 of 6 gray messages consumed (100 %), 0 left, 1 gray consumer still gray")
    beside_the_browser(cluster.ns_call, lambda ns_client: ns_client.update_cutover(operation, state="SUCCEEDED"))
    expect(page.locator("#drain-progress")).to_have_count(0)


def test_a_rollout_that_rolled_back_is_not_shown_as_a_failure(gaps: Gaps, new_page) -> None:
    cluster = gaps.cluster
    graymq(cluster.ns_url, "gray", "switch", "G_ROLLOUT", "on")
    record(cluster, "G_ROLLOUT", "rollout", "promote", state="ABORTED", step="rollback",
           result={"outcome": "ROLLED_BACK", "message": "rolled back at weight 10%: gray failure rate 40 %"})
    failed = record(cluster, "G_ROLLOUT", "promote", "drain", state="FAILED", step="drain")
    page = open_console(new_page(), f"{cluster.ns_url}/console/operations")
    rollout = page.locator('article[data-state="ABORTED"]')
    expect(rollout.locator(".state")).to_have_text("ROLLED BACK")
    expect(rollout).to_contain_text("as its checks decided")
    assert rollout.evaluate("node => getComputedStyle(node).borderLeftColor") != BAD
    promote = page.locator(f'article[data-operation="{failed}"]')
    assert promote.evaluate("node => getComputedStyle(node).borderLeftColor") == BAD  # a failure still is one


def test_a_broker_that_does_not_answer_is_marked_and_the_others_figures_stay(gaps: Gaps, new_page) -> None:
    cluster = gaps.cluster
    ns = cluster.ns_url
    start_consumer(gaps.start, ns, "G_DEAD", "c1", TOPIC)
    cluster.brokers["broker-b"].kill()  # last test of the module: the others need it
    page = open_console(new_page(), f"{ns}/console/groups/G_DEAD")
    dead = page.locator('.broker-row[data-broker="broker-b"]')  # one per topic: TOPIC and the group's retry topic
    expect(dead.first).to_have_attribute("data-available", "false")
    assert dead.evaluate_all("rows => rows.map(r => r.dataset.available)") == ["false"] * dead.count()
    expect(dead.first.locator(".broker")).to_contain_text("no answer")
    expect(page.locator("#unanswered")).to_contain_text("no answer from broker-b")
    expect(page.locator("#gray-backlog")).to_have_text("?")
    expect(page.locator('.broker-row[data-broker="broker-a"]').first).to_have_attribute("data-available", "true")
    expect(page.locator(f'[data-queue="broker-a:{TOPIC}:0"] .offsets').first).to_contain_text("committed")
