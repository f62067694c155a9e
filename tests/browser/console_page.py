"""Driving the console as an operator does: open a page, enter a token, click an action, confirm with a reason."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from playwright.sync_api import Page, expect

T = TypeVar("T")
ARTIFACTS = Path(__file__).parent / "artifacts"  # screenshots, gitignored


def beside_the_browser(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a thread of its own: Playwright's sync API keeps an event loop running in the test's thread,
    where the cluster helpers' ``asyncio.run`` cannot start another."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn, *args).result()


def open_console(page: Page, url: str) -> Page:
    """Go to ``url`` and wait until its fragment has loaded once."""
    page.goto(url)
    page.wait_for_selector("#content[data-refreshed], #needs-token")
    return page


def enter_token(page: Page, token: str) -> None:
    """The token dialog, as a person fills it; the page reloads its fragment with it."""
    page.click("#token-enter")
    page.fill("#token-input", token)
    page.click("#token-save")
    expect(page.locator("#token-state")).to_have_text("token set")


def act(page: Page, trigger: str, reason: str) -> str:
    """Click ``trigger`` (a selector), check the confirmation says something, confirm with ``reason``; returns the
    confirmation's text once the result is shown."""
    page.locator("#status").evaluate("node => { node.hidden = true; node.textContent = ''; }")
    page.click(trigger)
    page.wait_for_selector("#confirm[open], #status:not([hidden])")
    if not page.locator("#confirm").evaluate("node => node.open"):
        return ""  # refused before any confirmation (the status says why)
    text = page.inner_text("#confirm-text")
    page.fill("#confirm-reason", reason)
    page.click("#confirm-ok")
    page.wait_for_selector("#status:not([hidden])")
    return text


def status(page: Page) -> str:
    return page.inner_text("#status")


def queue_owners(page: Page) -> dict[str, str]:
    """``BROKER:TOPIC:QUEUE_ID`` → ``data-owner`` of every cell of the queue map."""
    cells: list[list[str]] = page.eval_on_selector_all(
        "[data-queue]", "cells => cells.map(c => [c.dataset.queue, c.dataset.owner])")
    return dict((queue, owner) for queue, owner in cells)


def status_owners(status_json: dict[str, Any]) -> dict[str, str]:
    """The same mapping from ``graymq gray status --json``: each queue a client reports holding, by its holders."""
    owners: dict[str, list[str]] = {}
    for client in status_json["clients"]:
        for queue in client.get("queues") or []:
            owners.setdefault(queue, []).append(client["client_id"])
    return {queue: ",".join(sorted(ids)) for queue, ids in owners.items()}
