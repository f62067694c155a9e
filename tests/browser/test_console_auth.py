"""With authentication on (not dev mode), the console shows nothing without a token, refuses an action without one
or with a token that lacks the admin right, and carries it out with the admin token, audited under its name."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.console_page import act, enter_token, open_console, status
from tests.support.trust import ADMIN, add_principal, bearer, start_secure_nameserver

pytestmark = pytest.mark.e2e
GROUP = "GID_CONSOLE_AUTH"


def switch(ns: str) -> bool:
    return bool(httpx.get(f"{ns}/v1/groups/{GROUP}", headers=bearer(ADMIN), timeout=5).json()["gray_switch"])


def test_an_action_without_a_token_or_the_admin_right_is_refused_and_one_with_the_admin_token_is_audited(
    graymq_process, fresh_pg_url, new_page
) -> None:
    ns = start_secure_nameserver(graymq_process, fresh_pg_url)
    httpx.put(f"{ns}/v1/groups/{GROUP}/switch", json={"enabled": True}, headers=bearer(ADMIN),
              timeout=5).raise_for_status()
    viewer = add_principal(ns, "viewer", "--consume", GROUP)
    page = open_console(new_page(), f"{ns}/console/groups/{GROUP}")
    expect(page.locator("#needs-token")).to_contain_text("UNAUTHORIZED")
    expect(page.locator("#token-state")).to_have_text("no token")  # not dev mode: no badge says it is
    expect(page.locator("#dev-mode")).to_have_count(0)
    expect(page.locator("#promote")).to_be_hidden()  # nothing shown yet: no promote or rollback offered
    off = {"action": {"action": "switch", "enabled": False}, "reason": "no token"}
    answer = page.request.post(f"{ns}/console/api/groups/{GROUP}/actions", data=off)
    assert answer.status == 401, answer.text()

    enter_token(page, viewer)  # may read the group, not change it
    expect(page.locator(".summary")).to_have_attribute("data-switch", "on")
    assert act(page, '.controls button:text-is("off")', "not mine to do") == ""
    assert status(page).startswith("refused: 403 FORBIDDEN: principal viewer may not administer")
    assert switch(ns)

    page.click("#token-forget")
    enter_token(page, ADMIN)
    confirmation = act(page, '.controls button:text-is("off")', "pause the canary")
    assert confirmation.startswith(f"turns the gray switch of {GROUP} off: 0 gray consumers drain 0 gray queues")
    assert status(page) == f"gray switch of {GROUP} turned off"
    expect(page.locator(".summary")).to_have_attribute("data-switch", "off")
    assert not switch(ns)
    entry = page.locator('table.audit tr[data-audit-action="set_switch"]').first
    expect(entry.locator(".actor")).to_have_text("ops")
    expect(entry.locator(".reason")).to_have_text("pause the canary")

    page.fill('form[data-kind="rule"] [name=selector]', "version=v3")
    page.select_option('form[data-kind="rule"] [name=gray]', "false")
    assert act(page, 'form[data-kind="rule"] button', "v3 stays normal").startswith("adds the rule version=v3 → normal")
    assert status(page) == "rule #1 version=v3 → normal added"
    expect(page.locator('tr[data-rule="1"]')).to_contain_text("version=v3")
    act(page, 'tr[data-rule="1"] button', "not needed")
    expect(page.locator('tr[data-rule="1"]')).to_have_count(0)
    page.fill('form[data-kind="weight"] [name=weight]', "25")
    assert act(page, 'form[data-kind="weight"] button', "a quarter").startswith(f"sets the weight of {GROUP} from 0%")
    expect(page.locator(".summary")).to_have_attribute("data-weight", "25")
    assert "token" not in page.url and ADMIN not in page.url
