"""A broker whose token is bound to other broker names says so, in one line naming the principal, the broker name,
the names it may use and the fix: on the broker's own output at start (not serving any route, no HTTP library
boilerplate), in ``graymq topic route`` and in a producer's error (the name server remembers the refusal)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.support.cli import wait_for
from tests.support.trust import ADMIN, SECURE_ENV, StartProcess, add_principal, bearer, cli, start_secure_nameserver

pytestmark = pytest.mark.integration

REFUSAL = ("principal ops-broker may not register as broker broker-a (its broker names: ops-broker): "
           "graymq principal add NAME --broker --broker-name broker-a")


def principal(ns_url: str, body: dict[str, object]) -> str:
    """A new principal's token (through the API: quicker than a CLI process)."""
    answer = httpx.post(f"{ns_url}/v1/principals", json=body, headers=bearer(ADMIN), timeout=10)
    answer.raise_for_status()
    return str(answer.json()["token"])


def test_a_broker_refused_by_its_tokens_broker_names_says_who_what_and_how_to_fix_it_everywhere(
        graymq_process: StartProcess, fresh_pg_url: str, tmp_path: Path) -> None:
    ns_url = start_secure_nameserver(graymq_process, fresh_pg_url)
    broker_token = add_principal(ns_url, "ops-broker", "--broker")  # the earlier contract's script: bound to ops-broker
    producer_token = principal(ns_url, {"name": "orders", "produce": ["ORDERS"]})
    httpx.put(f"{ns_url}/v1/topics/ORDERS", json={"queue_nums": 4, "gray_queue_nums": 0}, headers=bearer(ADMIN),
              timeout=10).raise_for_status()
    broker = graymq_process("broker", "--name", "broker-a", "--port", "0", "--store", str(tmp_path / "b"),
                            "--nameserver", ns_url, env={**SECURE_ENV, "GRAYMQ_BROKER_TOKEN": broker_token})

    line = broker.wait_for_line("not serving any route")
    assert REFUSAL in line and ns_url in line
    assert "serving on" not in broker.output and "developer.mozilla.org" not in broker.output
    assert broker.output.count(REFUSAL) == 1  # said once, not at every retry

    def refusal_known() -> bool:
        answer = httpx.get(f"{ns_url}/v1/topics/ORDERS/route", headers=bearer(ADMIN), timeout=5)
        return REFUSAL in answer.text

    wait_for(refusal_known, 20, "the name server to remember the refused registration")
    route = cli(ns_url, "topic", "route", "ORDERS")
    assert route.returncode != 0 and REFUSAL in route.stderr and "no live broker serves topic ORDERS" in route.stderr
    assert len([line for line in route.stderr.splitlines() if REFUSAL in line]) == 1
    produced = cli(ns_url, "produce", "ORDERS", "--body", "x", "--json", token=producer_token, admin=None)
    assert produced.returncode != 0 and REFUSAL in json.loads(produced.stdout)["error"]

    # once a broker of that name registers, the route lists it and the refusal is gone
    right_token = principal(ns_url, {"name": "broker-a-principal", "broker": True, "broker_names": ["broker-a"]})
    fixed = graymq_process("broker", "--name", "broker-a", "--port", "0", "--store", str(tmp_path / "b2"),
                           "--nameserver", ns_url, env={**SECURE_ENV, "GRAYMQ_BROKER_TOKEN": right_token})
    fixed.wait_for_line("serving on")
    broker.terminate()
    wait_for(lambda: not refusal_known(), 20, "the refusal to be forgotten once broker-a registered")
    # a refused broker beside live ones: listed by the route (JSON) and said on stderr by the table
    beat = httpx.post(f"{ns_url}/v1/brokers/heartbeat", json={"broker_name": "broker-b", "address": "10.0.0.2:1"},
                      headers=bearer(broker_token), timeout=10)
    assert beat.status_code == 403
    listed = json.loads(cli(ns_url, "topic", "route", "ORDERS", "--json").stdout)
    assert [b["broker_name"] for b in listed["brokers"]] == ["broker-a"]
    assert [r["broker_name"] for r in listed["refused_registrations"]] == ["broker-b"]
    shown = cli(ns_url, "topic", "route", "ORDERS")
    assert shown.returncode == 0 and shown.stderr.splitlines() == [
        f"broker broker-b is in no route: {REFUSAL.replace('broker-a', 'broker-b')} makes a principal that may (its "
        "token as GRAYMQ_BROKER_TOKEN), or run the broker under one of its names"]
