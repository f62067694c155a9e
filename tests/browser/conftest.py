"""A headless Chromium (Debian's, at /usr/bin/chromium, installed by ``make system-deps``) driven by Playwright;
one browser per test module (Playwright's sync API keeps an event loop running while it is open, which
``asyncio.run`` in the tests that follow would refuse), a fresh context (own session storage) per test, a
screenshot of every page a test opened kept under tests/browser/artifacts/ (gitignored)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser.console_page import ARTIFACTS

CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: `make system-deps` installs Debian's chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def new_page(browser, request) -> Iterator[object]:  # type: ignore[no-untyped-def]
    """``new_page()`` opens a page in its own context; at teardown each is screenshotted into ARTIFACTS."""
    contexts = []

    def open_page():  # type: ignore[no-untyped-def]
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.set_default_timeout(20_000)
        contexts.append(context)
        return context.new_page()

    yield open_page
    ARTIFACTS.mkdir(exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.name)
    for i, context in enumerate(contexts):
        for j, page in enumerate(context.pages):
            page.screenshot(path=str(ARTIFACTS / f"{name}-{i}{j}.png"), full_page=True)
        context.close()
