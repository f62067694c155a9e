"""Two name-server replicas on one PostgreSQL database: a promote started in one replica's console runs there as
its single RUNNING operation, the other replica's console shows it live and refuses a second one, and both show it
succeed.

A gray producer (version=v2) that is stopped (SIGSTOP) holds the promote at its first step, waiting for the
producer to report normal, for as long as the test needs to look; SIGCONT lets it finish. The screenshot of the
group page during that promote is kept as ``console-promote.png`` among the artifacts (docs/console-promote.png).
"""

from __future__ import annotations

import signal

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.console_page import ARTIFACTS, act, beside_the_browser, open_console, status
from tests.support.cli import start_consumer, wait_for
from tests.support.cluster import Cluster

pytestmark = pytest.mark.e2e
GROUP = "GID_CONSOLE_HA"
TOPIC = "TOPIC_CONSOLE_HA"
# A stopped gray producer is waited for until it reports or expires: long enough for the test to look.
EXPIRY = {"GRAYMQ_CLIENT_EXPIRY_SECONDS": "60"}


def operations(ns: str, state: str | None = None) -> list[dict[str, object]]:
    params = {"state": state} if state else {}
    return list(httpx.get(f"{ns}/v1/groups/{GROUP}/cutovers", params=params, timeout=5).json())


def producer_gray(ns: str) -> bool:
    answer = httpx.get(f"{ns}/v1/groups/{GROUP}/clients", params={"role": "producer"}, timeout=5)
    return answer.status_code == 200 and any(c["gray"] for c in answer.json()["clients"])


def test_a_promote_started_on_one_replica_is_one_operation_watched_and_guarded_from_the_other(
    graymq_process, fresh_pg_url, tmp_path, new_page
) -> None:
    cluster = Cluster(graymq_process, fresh_pg_url, tmp_path)
    a, b = (str(cluster.start_nameserver(**EXPIRY).ready_info["url"]) for _ in range(2))  # type: ignore[index]
    cluster.add_broker("broker-a")
    beside_the_browser(cluster.create_topic, TOPIC, 6, 2)
    beside_the_browser(cluster.ns_call, lambda ns: ns.add_rule(GROUP, {"version": "v2"}, True))
    ns = cluster.ns_url
    for cid in ("v1a", "v2a"):
        start_consumer(graymq_process, ns, GROUP, cid, TOPIC, "*", "--label", f"version={cid[:2]}")
    gray_producer = graymq_process("produce", TOPIC, "--group", GROUP, "--label", "version=v2", "--count", "100000",
                                   "--interval", "0.05", "--client-id", "producer-v2", "--json", "--nameserver", ns,
                                   wait=False)
    wait_for(lambda: producer_gray(a), 30, "the v2 producer gray")
    gray_producer.proc.send_signal(signal.SIGSTOP)
    try:
        page_a = open_console(new_page(), f"{a}/console/groups/{GROUP}")
        expect(page_a.locator('tr[data-client="v2a"]')).to_have_attribute("data-gray", "true")
        confirmation = act(page_a, "#promote", "v2 is good")
        assert confirmation.startswith(f"promotes {GROUP}: 1 gray producer and 1 gray consumer turn normal")
        assert status(page_a) == f"promote #1 of {GROUP} started (runs in the name server; its steps show below)"

        page_b = open_console(new_page(), f"{b}/console/groups/{GROUP}")
        expect(page_b.locator("#running-operation")).to_contain_text("promote #1 running, step producers")
        act(page_b, "#promote", "a second one")
        assert status(page_b).startswith(f"refused: 409 promote #1 is already running on {GROUP} (started by dev)")
        assert [op["id"] for op in operations(a, "RUNNING")] == [op["id"] for op in operations(b, "RUNNING")] == [1]
        expect(page_a.locator("#running-operation")).to_contain_text("promote #1 running")
        ARTIFACTS.mkdir(exist_ok=True)
        page_a.screenshot(path=str(ARTIFACTS / "console-promote.png"), full_page=True)
    finally:
        gray_producer.proc.send_signal(signal.SIGCONT)

    for page in (page_a, page_b):
        expect(page.locator('article.operation[data-operation="1"]')).to_have_attribute("data-state", "SUCCEEDED",
                                                                                         timeout=60_000)
    expect(page_b.locator('tr[data-client="v2a"]')).to_have_attribute("data-gray", "false")
    assert [(op["id"], op["state"], op["started_by"]) for op in operations(b)] == [(1, "SUCCEEDED", "dev")]
    requested = page_b.locator('table.audit tr[data-audit-action="requested"]')
    expect(requested.locator(".reason")).to_have_text("v2 is good")
