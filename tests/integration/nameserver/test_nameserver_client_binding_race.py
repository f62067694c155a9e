"""A client id is bound to one principal across its roles even when two first heartbeats race, on a real name
server process on PostgreSQL and SQLite: the loser gets the refusal a later heartbeat gets."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from threading import Barrier

import httpx
import pytest

from tests.support.trust import StartProcess, add_principal, bearer, start_secure_nameserver

pytestmark = pytest.mark.integration
GROUP = "G_RACE"
IDS = 100


@pytest.fixture
def ns_url(db: str, graymq_process: StartProcess) -> str:
    return start_secure_nameserver(graymq_process, db)


def test_two_first_heartbeats_at_once_bind_a_client_id_to_one_principal(ns_url: str) -> None:
    tokens = {name: add_principal(ns_url, name, "--consume", GROUP, "--produce", "T_RACE") for name in ("alice", "bob")}
    contenders = [("alice", "consumer"), ("bob", "producer")]

    def heartbeat(http: httpx.Client, barrier: Barrier, client_id: str, name: str, role: str) -> httpx.Response:
        body = {"group": GROUP, "client_id": client_id, "role": role}
        barrier.wait()
        return http.post("/v1/clients/heartbeat", json=body, headers=bearer(tokens[name]))

    outcomes: list[tuple[str, list[httpx.Response]]] = []
    with httpx.Client(base_url=ns_url, timeout=30) as http, ThreadPoolExecutor(len(contenders)) as pool:
        for n in range(IDS):
            client_id, barrier = f"c{n}", Barrier(len(contenders))
            pending = [pool.submit(heartbeat, http, barrier, client_id, name, role) for name, role in contenders]
            outcomes.append((client_id, [answer.result() for answer in pending]))

    both = [client_id for client_id, answers in outcomes if all(a.status_code == 200 for a in answers)]
    assert both == [], f"{len(both)} of {IDS} client ids bound to both principals"
    for client_id, answers in outcomes:
        [(winner, winner_role)] = [c for c, a in zip(contenders, answers, strict=True) if a.status_code == 200]
        [(loser, lost)] = [(c[0], a) for c, a in zip(contenders, answers, strict=True) if a.status_code != 200]
        assert lost.status_code == 403, lost.text
        assert f"{lost.json()['error']}: {lost.json()['detail']}" == (
            f"FORBIDDEN: principal {loser} may not act as client {client_id} ({winner_role}) of group {GROUP}: "
            f"it belongs to principal {winner}")
