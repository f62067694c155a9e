"""Numbers the console and the REST API are given are checked against their ranges on a real name server process
on PostgreSQL: an id beyond the database's integer, a NaN, an infinity or an absurd duration is a 4xx naming the
field (never a 500), and nothing is started or stored."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.trust import ADMIN, StartProcess, bearer, start_secure_nameserver

pytestmark = pytest.mark.integration
GROUP = "G_NUMBERS"
BEYOND = [2**31, 2**63]  # past PostgreSQL's INTEGER ids; past a 64-bit integer (OverflowError in the driver)
ROLLOUT = {"steps": [5, 50], "step_seconds": 2, "reason": "canary"}


@pytest.fixture
def ns(graymq_process: StartProcess, fresh_pg_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=start_secure_nameserver(graymq_process, fresh_pg_url), headers=bearer(ADMIN),
                      timeout=30) as http:
        http.put(f"/v1/groups/{GROUP}/switch", json={"enabled": True}).raise_for_status()
        yield http


def refused(answer: httpx.Response, field: str, why: str) -> None:
    """A 422 whose one problem is ``field``, for ``why`` (pydantic's words)."""
    assert answer.status_code == 422, answer.text
    [problem] = answer.json()["detail"]
    assert (problem["loc"][-1], why in problem["msg"]) == (field, True), problem


def raw_json(http: httpx.Client, method: str, path: str, text: str) -> httpx.Response:
    """``text`` sent as the JSON body as it is: NaN and Infinity are no JSON, but parsers take them."""
    return http.request(method, path, content=text, headers={"Content-Type": "application/json"})


def test_ids_beyond_the_databases_integers_are_refused_naming_the_id(ns: httpx.Client) -> None:
    for number in BEYOND:
        refused_ids(ns, number)


def refused_ids(ns: httpx.Client, number: int) -> None:
    limit = "less than or equal to 2147483647"
    refused(ns.post(f"/console/api/operations/{number}/abort", json={"reason": "x"}), "operation_id", limit)
    rule_delete = {"action": {"action": "rule_delete", "rule_id": number}, "reason": "x"}
    refused(ns.post(f"/console/api/groups/{GROUP}/preview", json={"action": rule_delete["action"]}), "rule_id", limit)
    refused(ns.post(f"/console/api/groups/{GROUP}/actions", json=rule_delete), "rule_id", limit)
    refused(ns.get(f"/v1/cutovers/{number}"), "operation_id", limit)
    refused(ns.patch(f"/v1/cutovers/{number}", json={"step": "x"}), "operation_id", limit)
    refused(ns.delete(f"/v1/groups/{GROUP}/rules/{number}"), "rule_id", limit)
    refused(ns.put(f"/v1/groups/{GROUP}/clients/c1/flag", json={"gray": True},
                   headers={"X-Graymq-Operation": str(number)}), "X-Graymq-Operation", limit)


NOT_NUMBERS = [  # field, its JSON text, why pydantic refuses it
    ("step_seconds", "NaN", "finite number"),
    ("step_seconds", "Infinity", "finite number"),
    ("step_seconds", "1e308", "less than or equal to 86400"),
    ("timeout_s", "NaN", "finite number"),
    ("timeout_s", "Infinity", "finite number"),
    ("timeout_s", "1e9", "less than or equal to 604800"),
    ("max_p99_ms", "Infinity", "finite number"),
    ("max_failure_rate", "NaN", "finite number"),
    ("failure_margin", "Infinity", "finite number"),
    ("min_messages", str(10**30), "less than or equal to"),
    ("max_lag", str(10**30), "less than or equal to"),
    ("failed_checks", str(10**9), "less than or equal to 1000"),
]


def test_a_rollout_with_a_number_not_finite_or_absurd_is_refused_and_starts_nothing(ns: httpx.Client) -> None:
    for field, value, why in NOT_NUMBERS:
        body = ", ".join(f'"{k}": {v!r}'.replace("'", '"') for k, v in ROLLOUT.items() if k != field)
        text = f'{{{body}, "{field}": {value}}}'
        for path in ("rollout/preview", "rollout"):
            refused(raw_json(ns, "POST", f"/console/api/groups/{GROUP}/{path}", text), field, why)
    assert ns.get(f"/v1/groups/{GROUP}/cutovers").json() == []


def test_an_operation_result_with_nan_or_infinity_is_refused_and_the_record_kept(ns: httpx.Client) -> None:
    op: dict[str, Any] = ns.post(f"/v1/groups/{GROUP}/cutovers", json={"kind": "promote"}).json()
    for value in ("NaN", "Infinity", "-Infinity"):
        answer = raw_json(ns, "PATCH", f"/v1/cutovers/{op['id']}", f'{{"result": {{"gray_backlog": {value}}}}}')
        refused(answer, "result", "NaN and infinite numbers are not allowed")
    assert ns.get(f"/v1/cutovers/{op['id']}").json() == op
