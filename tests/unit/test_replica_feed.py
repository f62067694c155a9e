"""The leader's side of sync replication without a network: a send waits for every confirmed in-sync follower's
acknowledgement (its next fetch offset), not for one outside the set; leaving the set releases what waited for it;
a timeout fails the send; proposals follow who fetched lately and how far behind. Consumers read, and long polls
wake, only up to what every in-sync follower stored."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import pytest

from graymq.broker_ext.replication.feed import Follower, ReplicaFeed
from graymq.broker_ext.replication.role import ReplicaRole
from graymq.protocol.errors import ReplicationTimeoutError

pytestmark = pytest.mark.unit


def feed(timeout_s: float = 5.0, end: int = 1000, mode: str = "sync",
         woken: list[tuple[str, int]] | None = None) -> ReplicaFeed:
    role = ReplicaRole("b", 0, mode, epoch=3, leader_id=0, in_sync=frozenset({0, 1}))
    settings: Any = SimpleNamespace(name="b", replication_timeout_s=timeout_s, replica_lag_s=3.0,
                                    replica_lag_bytes=100)
    store: Any = SimpleNamespace(max_physical_offset=end)
    notify = (lambda topic, queue_id: woken.append((topic, queue_id))) if woken is not None else print
    return ReplicaFeed(settings, role, store, state=None, notify=notify)  # type: ignore[arg-type]


def test_a_sync_send_waits_for_every_in_sync_follower_and_only_them() -> None:
    async def scenario() -> None:
        f = feed()
        f.followers[2] = Follower(offset=0)  # not in the in-sync set: never waited for
        waiting = f.acked(500)
        assert waiting is not None and not waiting.done()
        f.followers[1] = Follower(offset=499)
        f._release()
        assert not waiting.done()
        f.followers[1].offset = 500
        f._release()
        await asyncio.sleep(0)
        assert waiting.done() and waiting.result() is None
        assert f.acked(500) is None  # already stored by every in-sync follower

    asyncio.run(scenario())


def test_a_follower_leaving_the_in_sync_set_releases_what_waited_for_it() -> None:
    async def scenario() -> None:
        f = feed()
        waiting = f.acked(800)
        assert waiting is not None
        f.role.in_sync = frozenset({0})  # the name server confirmed the leader's proposal
        f.in_sync_confirmed()
        assert waiting.done() and waiting.result() is None

    asyncio.run(scenario())


def test_an_acknowledged_send_lets_go_of_its_timeout_at_once() -> None:
    """Its timer would otherwise keep the future, and the response waiting on it, for the whole timeout."""
    import gc
    import weakref

    async def scenario() -> None:
        f = feed(timeout_s=60)
        waiting = f.acked(500)
        assert waiting is not None
        gone = weakref.ref(waiting)
        f.followers[1] = Follower(offset=500)
        f._release()
        assert waiting.result() is None
        del waiting
        gc.collect()
        assert gone() is None

    asyncio.run(scenario())


def test_a_send_no_follower_stores_in_time_fails_unacknowledged() -> None:
    async def scenario() -> None:
        f = feed(timeout_s=0.05)
        waiting = f.acked(10)
        assert waiting is not None
        with pytest.raises(ReplicationTimeoutError, match="did not store up to offset 10"):
            await waiting

    asyncio.run(scenario())


def test_the_proposal_keeps_followers_that_fetched_lately_and_are_close_enough() -> None:
    f = feed(end=1000)
    now = time.monotonic()
    f.followers = {1: Follower(offset=950, fetched_at=now), 2: Follower(offset=500, fetched_at=now),
                   3: Follower(offset=1000, fetched_at=now - 10)}
    assert f.proposal() == [0, 1]
    assert f.lag() == {1: 50, 2: 500, 3: 0}


def test_a_sync_leader_serves_consumers_only_what_every_in_sync_follower_stored() -> None:
    f = feed(end=1000)
    f.reset()  # a term starts: confirmed up to the log end it took over with
    f.store.max_physical_offset = 1500
    assert f.confirmed_offset() == 1000  # follower 1 has not fetched past the term's start
    f.followers[1] = Follower(offset=1200)
    assert f.confirmed_offset() == 1200
    f.followers[1].offset = 1100  # a follower going back (it truncated) does not take back what was served
    assert f.confirmed_offset() == 1200
    f.role.in_sync = frozenset({0})  # alone in sync: the log end
    assert f.confirmed_offset() == 1500
    assert f.listed_end() == 1500  # GET_MAX_OFFSET counts what consumers may read
    f.role.leader_id = 1  # deposed: nothing past what it confirmed as leader
    f.store.max_physical_offset = 1800
    assert f.confirmed_offset() == 1500
    assert f.listed_end() is None  # a follower's max offset says what it stores (consumers read the leader)


def test_async_and_unreplicated_brokers_serve_the_log_end() -> None:
    for mode in ("async", None):
        f = feed(end=1000, mode=mode)  # type: ignore[arg-type]
        assert f.confirmed_offset() == 1000


def test_long_polls_wake_when_the_followers_stored_the_append_not_at_the_append() -> None:
    woken: list[tuple[str, int]] = []
    f = feed(end=1000, woken=woken)
    f.reset()
    f.store.max_physical_offset = 1100
    f.wake(1100, "T", 3)
    f.store.max_physical_offset = 1200
    f.wake(1200, "T", 1)
    assert woken == []
    f.followers[1] = Follower(offset=1100)
    f._release()  # what a follower's fetch does
    assert woken == [("T", 3)]
    f.followers[1].offset = 1200
    f._release()
    assert woken == [("T", 3), ("T", 1)]
    f.role.in_sync = frozenset({0})
    f.wake(1200, "T", 2)  # nobody else in sync: at once
    assert woken[-1] == ("T", 2)
