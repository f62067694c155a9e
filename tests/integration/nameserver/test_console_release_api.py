"""The console's release endpoints follow its other reads' and actions' rules with authentication on: the health
series needs a token (any principal's), starting and aborting a rollout the admin right; a rollout with a value out
of range gets one line naming it and starts nothing; aborting what this name server does not run is a 409."""

from __future__ import annotations

import httpx
import pytest

from tests.support.trust import ADMIN, add_principal, bearer, start_secure_nameserver

pytestmark = pytest.mark.integration
GROUP = "G_RELEASE_API"


def test_health_needs_a_token_and_rollout_and_abort_the_admin_right(graymq_process, fresh_pg_url) -> None:
    ns = start_secure_nameserver(graymq_process, fresh_pg_url)
    viewer = add_principal(ns, "viewer", "--consume", GROUP)
    health = f"{ns}/console/api/groups/{GROUP}/health"
    assert httpx.get(health, timeout=5).status_code == 401
    answer = httpx.get(health, headers=bearer(viewer), timeout=5)
    assert answer.status_code == 200, answer.text
    assert answer.json()["sides"] == {"gray": [], "normal": []}  # no consumer has reported

    rollout = {"steps": [5, 50], "step_seconds": 2, "reason": "canary"}
    for path in ("rollout/preview", "rollout"):
        refused = httpx.post(f"{ns}/console/api/groups/{GROUP}/{path}", json=rollout, headers=bearer(viewer),
                             timeout=5)
        assert refused.status_code == 403, refused.text
    bad = httpx.post(f"{ns}/console/api/groups/{GROUP}/rollout", json={**rollout, "min_messages": 0},
                     headers=bearer(ADMIN), timeout=5)
    assert (bad.status_code, bad.json()["error"]) == (400, "out of range: --min-messages (see graymq gray rollout "
                                                            "--help)")
    nothing = httpx.get(f"{ns}/v1/groups/{GROUP}/cutovers", headers=bearer(ADMIN), timeout=5)
    assert nothing.status_code == 404, nothing.text  # not even the group: nothing started
    preview = httpx.post(f"{ns}/console/api/groups/{GROUP}/rollout/preview", json=rollout, headers=bearer(ADMIN),
                         timeout=5)
    assert preview.json()["message"].startswith("rolls G_RELEASE_API out at weights 5% → 50%, 2 s each")

    httpx.put(f"{ns}/v1/groups/{GROUP}/switch", json={"enabled": True}, headers=bearer(ADMIN),
              timeout=5).raise_for_status()
    op = httpx.post(f"{ns}/v1/groups/{GROUP}/cutovers", json={"kind": "rollout", "mode": "promote",
                                                              "producer_groups": [GROUP]},
                    headers=bearer(ADMIN), timeout=5).json()  # as `graymq gray rollout` records it, run elsewhere
    abort = f"{ns}/console/api/operations/{op['id']}/abort"
    assert httpx.post(abort, json={"reason": "x"}, headers=bearer(viewer), timeout=5).status_code == 403
    elsewhere = httpx.post(abort, json={"reason": "x"}, headers=bearer(ADMIN), timeout=5)
    assert elsewhere.status_code == 409
    assert elsewhere.json()["error"].startswith(f"rollout #{op['id']} is not run by this name server's console")
