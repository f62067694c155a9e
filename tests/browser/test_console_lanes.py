"""Lanes in the console (docs/lanes.md): a group's base and lanes side by side (clients, queues on the map in each
lane's colour, backlog, a chart line per lane), which lane holds which slot of a topic, a lane's promote started
from the page and finishing while the other lanes run on, and a lane's rollback aborted from the page.

One name server in dev mode (SQLite, a health point every second) and broker-a; each scenario has its own group and
topic (6 queues, 2 gray, room for several lanes), so a lane ending in one leaves the others' slots alone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import NamedTuple

import httpx
import pytest
from playwright.sync_api import Page, expect

from graymq.devkit.processes import GraymqProcess
from tests.browser.console_page import act, beside_the_browser, open_console, status
from tests.support.cli import gray_status, graymq, start_consumer, wait_for
from tests.support.cluster import Cluster, module_processes

pytestmark = pytest.mark.e2e
SIDE, SIDE_TOPIC = "G_LANES_SIDE", "TOPIC_LANES_SIDE"  # base, gray and v3 consuming; 3 slots: one free
PROMOTE, PROMOTE_TOPIC = "G_LANES_PROMOTE", "TOPIC_LANES_PROMOTE"
ABORT, ABORT_TOPIC = "G_LANES_ABORT", "TOPIC_LANES_ABORT"


class Lanes(NamedTuple):
    cluster: Cluster
    start: Callable[..., GraymqProcess]  # stopped with the module


@pytest.fixture(scope="module")
def lanes(tmp_path_factory) -> Iterator[Lanes]:  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("lanes")
    with module_processes(root) as start:
        cluster = Cluster(start, f"sqlite:///{root / 'ns.db'}", root)
        cluster.start_nameserver(GRAYMQ_HEALTH_SAMPLE_SECONDS="1")
        cluster.add_broker("broker-a")
        for topic, slots in ((SIDE_TOPIC, 3), (PROMOTE_TOPIC, 2), (ABORT_TOPIC, 2)):
            beside_the_browser(cluster.create_topic, topic, 6, 2, 20.0, slots)
        yield Lanes(cluster, start)


def consumers(lanes: Lanes, group: str, topic: str, *clients: tuple[str, str | None]) -> None:
    """Start each (client id, lane) consuming ``topic`` in ``group`` (lane None: base) and wait until each holds
    queues."""
    ns = lanes.cluster.ns_url
    graymq(ns, "gray", "switch", group, "on")
    for client_id, lane in clients:
        start_consumer(lanes.start, ns, group, client_id, topic, "*", *(("--lane", lane) if lane else ()))
    wait_for(lambda: {c["client_id"] for c in gray_status(ns, group)["clients"] if c["queues"]}
             >= {cid for cid, _ in clients}, 40, f"the consumers of {group} holding queues")


def producer(lanes: Lanes, group: str, topic: str, client_id: str, lane: str | None, count: int = 20000) -> None:
    lanes.start("produce", topic, "--group", group, "--client-id", client_id, *(("--lane", lane) if lane else ()),
                "--count", str(count), "--size", "32", "--interval", "0.02", "--nameserver", lanes.cluster.ns_url,
                wait=False)


@pytest.fixture(scope="module")
def side_by_side(lanes: Lanes) -> str:
    """G_LANES_SIDE: b1 base, g1 gray, v3a in v3, a base and a v3 producer sending throughout."""
    consumers(lanes, SIDE, SIDE_TOPIC, ("b1", None), ("g1", "gray"), ("v3a", "v3"))
    producer(lanes, SIDE, SIDE_TOPIC, "p-base", None)
    producer(lanes, SIDE, SIDE_TOPIC, "p-v3", "v3")
    return f"{lanes.cluster.ns_url}/console/groups/{SIDE}"


def lane_of_cells(page: Page, topic: str) -> dict[int, str]:
    cells = page.eval_on_selector_all(f'[data-queue^="broker-a:{topic}:"]',
                                      "cells => cells.map(c => [c.dataset.queue, c.dataset.lane])")
    return {int(queue.rsplit(":", 1)[1]): lane for queue, lane in cells}


def chart_sides(page: Page, metric: str) -> dict[str, float | None]:
    return dict(json.loads(page.locator(f'#health figure[data-metric="{metric}"]').get_attribute("data-sides")
                           or "{}"))


def test_the_group_page_shows_base_and_each_lane_side_by_side_with_its_queues_backlog_and_chart(
    side_by_side: str, new_page
) -> None:
    page = open_console(new_page(), side_by_side)
    columns = page.locator("section.lane-column")
    expect(columns).to_have_count(3)
    assert columns.evaluate_all("cs => cs.map(c => c.dataset.lane)") == ["base", "gray", "v3"]
    for lane, client in (("base", "b1"), ("gray", "g1"), ("v3", "v3a")):
        expect(page.locator(f'section.lane-column[data-lane="{lane}"] li[data-client="{client}"]')).to_have_count(1)
    expect(page.locator('section.lane-column[data-lane="v3"] li[data-client="p-v3"]')).to_have_count(1)
    expect(page.locator('section.lane-column[data-lane="base"] li[data-client="v3a"]')).to_have_count(0)

    # the queue map: slot 0 gray, slot 1 v3 (appended after the 6 base queues), slot 2 free, in the lanes' colours
    assert lane_of_cells(page, SIDE_TOPIC) == {0: "gray", 1: "", 2: "", 3: "", 4: "", 5: "gray", 6: "v3", 7: "v3",
                                               8: "free", 9: "free"}
    v3_colour = next(c for c in (columns.nth(2).get_attribute("class") or "").split() if re.fullmatch(r"lane-c\d", c))
    for queue in (6, 7):
        cell = page.locator(f'[data-queue="broker-a:{SIDE_TOPIC}:{queue}"]')
        expect(cell).to_have_class(re.compile(rf"\blaned\b.*\b{v3_colour}\b"))
        expect(cell).to_have_attribute("data-owner", "v3a")
        expect(cell.locator(".qid i")).to_have_text("v3")
    expect(page.locator(f'[data-queue="broker-a:{SIDE_TOPIC}:0"]')).to_have_class(re.compile(r"\bgray\b"))

    for lane, cells in (("base", ""), ("gray", "gray"), ("v3", "v3")):  # its queues on every topic, retries too
        column = page.locator(f'section.lane-column[data-lane="{lane}"]')
        expect(column).to_have_attribute("data-queues", str(page.locator(f'.cell[data-lane="{cells}"]').count()))
        expect(column).to_have_attribute("data-backlog", re.compile(r"^\d+$"))  # read from the brokers

    wait_for(lambda: (chart_sides(page, "per_second").get("v3") or 0) > 0, 40, "the v3 lane's throughput charted")
    expect(page.locator('#health figure[data-metric="per_second"] polyline[data-side="v3"]')).to_have_class(
        re.compile(rf"\blane\b.*\b{v3_colour}\b"))
    expect(page.locator("#lane-legend")).to_contain_text("v3")
    expect(page.locator("#cutover-lane-choice")).to_be_visible()
    assert page.locator("#cutover-lane option").evaluate_all("os => os.map(o => o.value)") == ["gray", "v3"]


def test_the_lane_slots_show_which_lane_holds_which_slot_of_a_topic_and_the_free_ones(
    side_by_side: str, new_page
) -> None:
    page = open_console(new_page(), side_by_side)
    row = page.locator(f'#slot-use tr[data-topic="{SIDE_TOPIC}"]')
    expect(row).to_have_attribute("data-free", "1")
    slots = row.locator(".slot")
    assert slots.evaluate_all("s => s.map(x => [x.dataset.slot, x.dataset.lane])") == [
        ["0", "gray"], ["1", "v3"], ["2", ""]]
    expect(slots.nth(1)).to_contain_text("slot 1: v3 queues broker-a 6, 7")
    expect(slots.nth(2)).to_contain_text("slot 2: free queues broker-a 8, 9")
    expect(slots.nth(2)).to_have_class(re.compile(r"\bfree\b"))


def test_a_lanes_promote_started_from_the_console_finishes_and_gives_its_slot_back(lanes: Lanes, new_page) -> None:
    ns = lanes.cluster.ns_url
    consumers(lanes, PROMOTE, PROMOTE_TOPIC, ("b1", None), ("v4a", "v4"))
    producer(lanes, PROMOTE, PROMOTE_TOPIC, "p-v4", "v4")
    page = open_console(new_page(), f"{ns}/console/groups/{PROMOTE}")
    expect(page.locator('section.lane-column[data-lane="v4"] li[data-client="p-v4"]')).to_have_count(1)
    expect(page.locator(f'#slot-use tr[data-topic="{PROMOTE_TOPIC}"]')).to_have_attribute("data-free", "1")
    page.select_option("#cutover-lane", "v4")
    confirmation = act(page, "#promote", "v4 is good")
    assert re.match(rf"promotes lane v4 of {PROMOTE}: 1 v4 producer and 1 v4 consumer turn normal \(the consumers "
                    r"once they drain \d+ v4 queues, [\d,]+ messages? left\), 0 v4 rules removed", confirmation), \
        confirmation
    assert re.fullmatch(rf"promote #\d+ of {PROMOTE} lane v4 started .*", status(page)), status(page)
    operation = page.locator('article.operation[data-kind="promote"][data-lane="v4"]').first
    expect(operation.locator("h3")).to_contain_text("lane v4")
    expect(operation).to_have_attribute("data-state", "SUCCEEDED", timeout=90_000)
    expect(operation).to_contain_text(PROMOTE_TOPIC)  # the slot it gave back, in its report
    expect(page.locator(f'#slot-use tr[data-topic="{PROMOTE_TOPIC}"]')).to_have_attribute("data-free", "2")
    expect(page.locator("section.lane-column")).to_have_count(0)  # no lane but gray left: today's view
    v4a = next(c for c in gray_status(ns, PROMOTE)["clients"] if c["client_id"] == "v4a")
    assert (v4a["gray"], v4a["queues"] != []) == (False, True)
    requested = page.locator('table.audit tr[data-audit-action="requested"]')
    expect(requested.locator(".reason")).to_have_text("v4 is good")


def test_a_lanes_rollback_aborted_from_the_console_stops_where_it_is(lanes: Lanes, new_page) -> None:
    ns = lanes.cluster.ns_url
    consumers(lanes, ABORT, ABORT_TOPIC, ("b1", None))
    graymq(ns, "gray", "orphan", ABORT, "hold", "--lane", "v5")  # v5's queues wait for a v5 consumer: none comes
    producer(lanes, ABORT, ABORT_TOPIC, "p-v5", "v5")
    wait_for(lambda: "p-v5" in {c["client_id"] for c in gray_status(ns, ABORT)["clients"]}, 40,
             "the v5 producer registered")  # a process started on a loaded CI machine: seconds, not the page's 5 s
    page = open_console(new_page(), f"{ns}/console/groups/{ABORT}")
    v5 = page.locator('section.lane-column[data-lane="v5"]')
    expect(v5.locator('li[data-client="p-v5"]')).to_have_count(1)
    assert page.locator("section.lane-column").evaluate_all("cs => cs.map(c => c.dataset.lane)") == ["base", "v5"]
    expect(v5).to_have_attribute("data-backlog", re.compile(r"^[1-9]\d*$"))
    page.select_option("#cutover-lane", "v5")
    confirmation = act(page, "#rollback-drain", "")
    assert confirmation.startswith(f"rolls lane v5 of {ABORT} back (drain): 1 v5 producer turns normal"), confirmation
    assert re.fullmatch(rf"rollback #\d+ of {ABORT} lane v5 started .*", status(page)), status(page)
    expect(v5.locator(".lane-operation")).to_have_attribute("data-kind", "rollback")  # shown in its lane's column
    expect(page.locator("#running-operation")).to_have_attribute("data-lane", "v5")

    running = page.locator('article.operation[data-lane="v5"][data-state="RUNNING"]')
    expect(running.locator("button.abort")).to_have_attribute("data-kind", "rollback")
    act(page, 'article.operation[data-lane="v5"] button.abort', "wrong lane")
    assert re.fullmatch(rf"rollback #\d+ of {ABORT} lane v5 aborted at step \w+: stopped there, recorded FAILED; .*",
                        status(page)), status(page)
    ended = page.locator('article.operation[data-lane="v5"]').first
    expect(ended).to_have_attribute("data-state", "FAILED")
    expect(ended).to_contain_text("aborted from the console by dev")
    expect(page.locator("#running-operation")).to_have_count(0)
    entry = page.locator('table.audit tr[data-audit-action="abort"]')
    expect(entry.locator(".reason")).to_have_text("wrong lane")


def test_the_groups_list_counts_base_and_each_lanes_clients_apart(side_by_side: str, lanes: Lanes, new_page) -> None:
    page = open_console(new_page(), f"{lanes.cluster.ns_url}/console/")
    row = page.locator(f'tr[data-group="{SIDE}"]')
    expect(row.locator(".base-clients")).to_have_text("2")  # b1 and p-base
    assert row.locator(".lane-count").evaluate_all("ls => ls.map(l => [l.dataset.lane, l.dataset.clients])") == [
        ["gray", "1"], ["v3", "2"]]  # g1; v3a and p-v3
    expect(row.locator('.lane-count[data-lane="v3"]')).to_have_attribute("data-backlog", re.compile(r"^\d+$"))
    expect(row.locator('.lane-count[data-lane="v3"]')).to_have_class(re.compile(r"\blane-c[1-6]\b"))


def test_a_clients_flag_buttons_offer_each_lane_of_the_group_and_put_it_in_the_one_clicked(
    side_by_side: str, lanes: Lanes, new_page
) -> None:
    ns = lanes.cluster.ns_url
    page = open_console(new_page(), side_by_side)
    assert page.locator('tr[data-client="b1"] .flag-actions button').all_inner_texts() == ["normal", "gray", "v3"]
    confirmation = act(page, 'tr[data-client="b1"] button[data-lane="v3"]', "b1 tries v3")
    assert re.fullmatch(r"b1 gives up its \d+ queues?, enters lane v3 and takes its queues", confirmation), \
        confirmation
    assert status(page) == "flag of b1 set: lane v3"
    effective = page.locator('tr[data-client="b1"] td[data-lane]')
    expect(effective).to_have_attribute("data-lane", "v3", timeout=30_000)
    clients = httpx.get(f"{ns}/v1/groups/{SIDE}/clients", params={"role": "consumer"}, timeout=5).json()["clients"]
    b1 = next(c for c in clients if c["client_id"] == "b1")
    assert (b1["explicit_gray"], b1["explicit_lane"], b1["lane"]) == (True, "v3", "v3")  # the flag /v1 would set

    confirmation = act(page, 'tr[data-client="b1"] button:text-is("normal")', "back to base")
    assert re.fullmatch(r"b1 drains \d+ v3 queues?(, [\d,]+ messages? left| \(.*\)), then turns normal and takes "
                        r"normal queues", confirmation), confirmation
    assert status(page) == "flag of b1 set: normal"
    expect(effective).to_have_attribute("data-lane", "", timeout=60_000)
