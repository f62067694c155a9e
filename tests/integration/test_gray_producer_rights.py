"""With authentication on, only a principal whose rights name a producer group takes part in its release: another
cannot register a gray (or mark-honouring) producer in it, so it cannot hold up the group's promote; a promote
waiting for a producer says whose it is."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.support.trust import ADMIN, StartProcess, add_principal, bearer, cli, start_secure_nameserver

pytestmark = pytest.mark.integration
GROUP = "GID_A"


@pytest.fixture
def ns_url(graymq_process: StartProcess, fresh_pg_url: str) -> str:
    return start_secure_nameserver(graymq_process, fresh_pg_url)


def beat(client_id: str, **fields: object) -> dict[str, object]:
    return {"group": GROUP, "client_id": client_id, "role": "producer", "labels": {"version": "v2"}, **fields}


def test_a_principal_without_a_right_naming_the_producer_group_cannot_send_gray_in_it(ns_url: str) -> None:
    team = add_principal(ns_url, "team-a", "--consume", GROUP, "--produce", "ORDER_*")
    intruder = add_principal(ns_url, "intruder", "--produce", "OTHER_*")
    assert cli(ns_url, "gray", "rule", GROUP, "--label", "version=v2", "on").returncode == 0
    with httpx.Client(base_url=ns_url, timeout=30) as http:
        for gray in ({"gray": True, "state": "GRAY"}, {"declared_gray": True}, {"gray_marks": True}):
            refused = http.post("/v1/clients/heartbeat", json=beat("evil", **gray), headers=bearer(intruder))
            assert refused.status_code == 403, refused.text
            assert refused.json()["detail"] == (f"principal intruder may not send gray as producer group {GROUP} "
                                                "(no produce or consume right names it)")
        # a normal producer of it is let in, but stays out of the release: normal, marks not honoured
        answer = http.post("/v1/clients/heartbeat", json=beat("evil"), headers=bearer(intruder))
        assert answer.status_code == 200, answer.text
        assert (answer.json()["desired_gray"], answer.json()["gray_marks"]) == (False, False)
        watched = http.post("/v1/clients/watch", json={"group": GROUP, "client_id": "evil", "role": "producer"},
                            headers=bearer(intruder))
        assert (watched.json()["desired_gray"], watched.json()["gray_marks"]) == (False, False)
        # the group's own team is in the release: gray by the rule, marks honoured
        mine = http.post("/v1/clients/heartbeat", json=beat("pa"), headers=bearer(team)).json()
        assert (mine["desired_gray"], mine["gray_marks"]) == (True, True)
        assert http.post("/v1/clients/heartbeat", json=beat("pa", gray=True, state="GRAY", gray_marks=True),
                         headers=bearer(team)).status_code == 200
        listed = {c["client_id"]: c for c in
                  http.get(f"/v1/groups/{GROUP}/clients", headers=bearer(ADMIN)).json()["clients"]}
        assert (listed["pa"]["principal"], listed["pa"]["gray_marks"]) == ("team-a", True)

    status = json.loads(cli(ns_url, "gray", "status", GROUP, "--json").stdout)
    shown = {c["client_id"]: (c["gray_marks"], c["principal"]) for c in status["clients"]}
    assert shown == {"pa": (True, "team-a"), "evil": (None, "intruder")}

    # pa never reports normal: the promote times out naming it and its principal, not the intruder's producer
    promote = cli(ns_url, "gray", "promote", GROUP, "--timeout", "3", "--json")
    assert promote.returncode != 0
    report = json.loads(promote.stdout.strip().splitlines()[-1])
    assert report["state"] == "FAILED"
    assert "producers still gray: pa (principal team-a)" in report["message"], report["message"]
    assert "evil" not in report["message"]
