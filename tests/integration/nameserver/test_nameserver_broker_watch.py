"""A broker's watch wakes when the topic table changes, and a topic create can wait until every live broker serves
the topic; real name server processes on SQLite and PostgreSQL.

The long polls ask for more time than the HTTP client waits: one that is not woken fails with a read timeout
instead of answering at its own timeout.
"""

from __future__ import annotations

import concurrent.futures
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from nameserver_testkit import ADMIN_TOKENS, OPS, broker_heartbeat, wait_until

from graymq.devkit.processes import GraymqProcess

pytestmark = pytest.mark.integration

LONG_POLL_S = 60.0
CLIENT_S = 30.0


@pytest.fixture
def ns(db: str, graymq_process: Callable[..., GraymqProcess]) -> Iterator[httpx.Client]:
    """A name server process on each kind of database; requests as the admin ``ops``."""
    proc = graymq_process("nameserver", "--port", "0", "--db", db, "--migrate",
                          env={"GRAYMQ_ADMIN_TOKENS": ADMIN_TOKENS})
    assert proc.ready_info is not None
    with httpx.Client(base_url=proc.ready_info["url"], headers=OPS, timeout=CLIENT_S) as client:
        yield client


@pytest.fixture
def pool() -> Iterator[concurrent.futures.ThreadPoolExecutor]:
    with concurrent.futures.ThreadPoolExecutor(2) as executor:
        yield executor


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def watch(http: httpx.Client, version: str | None, timeout_s: float = LONG_POLL_S) -> str:
    response = http.post("/v1/brokers/watch", json={"broker_name": "b", "topics_version": version,
                                                    "timeout_s": timeout_s})
    assert response.status_code == 200, response.text
    return str(response.json()["topics_version"])


def put_topic(http: httpx.Client, topic: str, queues: int, wait_s: float) -> dict[str, Any]:
    response = http.put(f"/v1/topics/{topic}", json={"queue_nums": queues, "gray_queue_nums": 0},
                        params={"wait_s": wait_s}, headers=OPS)
    assert response.status_code in (200, 201), response.text
    return dict(response.json())


def test_a_watch_answers_at_once_when_the_broker_knows_no_or_another_version(ns: httpx.Client) -> None:
    current = broker_heartbeat(ns, unique("b"))["topics_version"]
    assert watch(ns, None) == current
    assert watch(ns, "something-else") == current
    assert watch(ns, current, timeout_s=0.2) == current  # unchanged: answers at its timeout


def test_a_watch_is_woken_by_a_topic_created_and_by_a_topic_deleted(
    ns: httpx.Client, pool: concurrent.futures.ThreadPoolExecutor
) -> None:
    topic = unique("T")
    before = broker_heartbeat(ns, unique("b"))["topics_version"]
    woken = pool.submit(watch, ns, before)
    put_topic(ns, topic, 4, wait_s=0)
    created = woken.result()
    assert created != before
    woken = pool.submit(watch, ns, created)
    assert ns.delete(f"/v1/topics/{topic}", headers=OPS).status_code == 204
    assert woken.result() not in (before, created)


def test_a_put_returns_once_every_live_broker_reports_the_topic(
    ns: httpx.Client, pool: concurrent.futures.ThreadPoolExecutor
) -> None:
    topic, b1, b2 = unique("T"), unique("b1"), unique("b2")
    broker_heartbeat(ns, b1)
    broker_heartbeat(ns, b2)
    pending = pool.submit(put_topic, ns, topic, 4, LONG_POLL_S)
    wait_until(lambda: topic in {t["topic"] for t in ns.get("/v1/topics").json()}, what="the topic committed")
    broker_heartbeat(ns, b1, (topic, 4, 0))
    assert not pending.done()
    broker_heartbeat(ns, b2, (topic, 4, 0))
    result = pending.result()
    assert (sorted(result["brokers_ready"]), result["brokers_pending"]) == (sorted([b1, b2]), [])


def test_a_put_names_the_brokers_that_did_not_serve_the_topic_within_its_wait(ns: httpx.Client) -> None:
    topic, silent = unique("T"), unique("b")
    broker_heartbeat(ns, silent)
    result = put_topic(ns, topic, 4, wait_s=0.5)
    assert (result["brokers_ready"], result["brokers_pending"]) == ([], [silent])
