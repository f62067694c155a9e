"""Queue leases on the broker: one owner per (group, queue), renewed, released, ended with the owner."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from graymq.broker_ext.groups.queue_leases import QueueLocks

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def conn() -> Any:
    return SimpleNamespace(attributes={})


def test_one_owner_per_queue_and_group_until_it_releases() -> None:
    locks = QueueLocks(30.0, Clock())
    a, b = conn(), conn()
    assert locks.lock("g", "A", a, [("T", 0), ("T", 1)]) == ([("T", 0), ("T", 1)], [])
    assert locks.lock("g", "B", b, [("T", 1), ("T", 2)]) == ([("T", 2)], [("T", 1, "A")])
    assert locks.lock("other", "B", b, [("T", 1)]) == ([("T", 1)], [])  # another group, another lease
    assert locks.check("g", "T", 1, "B") == "A" and locks.check("g", "T", 1, "A") is None
    assert not locks.unlock("g", "B", "T", 1)  # not B's to release
    assert locks.unlock("g", "A", "T", 1)
    assert locks.lock("g", "B", b, [("T", 1)]) == ([("T", 1)], [])
    assert locks.owner("g", "T", 1) == "B"


def test_a_lease_expires_unless_renewed_by_heartbeats_or_pulls() -> None:
    clock = Clock()
    locks = QueueLocks(30.0, clock)
    locks.lock("g", "A", conn(), [("T", 0), ("T", 1)])
    clock.now += 20
    locks.renew("g", "A")  # a heartbeat renews every lease of A
    clock.now += 20
    assert locks.owner("g", "T", 0) == "A"
    assert locks.check("g", "T", 1, "A") is None  # a pull renews its queue
    clock.now += 25
    assert locks.owner("g", "T", 0) is None and locks.owner("g", "T", 1) == "A"
    assert locks.lock("g", "B", conn(), [("T", 0)]) == ([("T", 0)], [])


def test_leases_end_with_the_owner_leaving_or_its_connection_closing() -> None:
    locks = QueueLocks(30.0, Clock())
    a1, a2 = conn(), conn()
    locks.lock("g", "A", a1, [("T", 0)])
    locks.lock("g", "A", a2, [("U", 0)])  # the same client through another broker connection
    assert locks.connection_closed(a1) == ["g"]
    assert locks.owner("g", "T", 0) is None and locks.owner("g", "U", 0) == "A"
    assert locks.release_client("g", "A") == 1
    assert locks.owner("g", "U", 0) is None
    locks.lock("g", "A", a1, [("T", 0)])
    locks.drop_topic("T")
    assert locks.owner("g", "T", 0) is None


def test_locks_run_without_a_connection_for_in_process_callers() -> None:
    assert asyncio.run(asyncio.sleep(0, QueueLocks(1.0).lock("g", "A", None, [("T", 0)]))) == ([("T", 0)], [])


def test_a_new_leader_grants_no_lease_until_its_predecessors_ran_out() -> None:
    clock = Clock()
    locks = QueueLocks(30.0, clock)
    locks.lock("g", "old-owner", conn(), [("T", 1)])  # a lease this leader granted itself
    locks.grant_after(clock.now + 30.0)
    locked, held = locks.lock("g", "c1", conn(), [("T", 0), ("T", 1)])
    assert locked == [] and [(t, q) for t, q, _ in held] == [("T", 0), ("T", 1)]
    assert locks.lock("g", "old-owner", conn(), [("T", 1)])[0] == [("T", 1)]  # its own lease renews as before
    clock.now += 31.0
    assert locks.lock("g", "c1", conn(), [("T", 0)])[0] == [("T", 0)]


def test_leases_copied_from_a_leader_let_their_holder_relock_at_once_and_others_when_they_would_have_ended() -> None:
    leader_clock, follower_clock = Clock(), Clock()
    follower_clock.now = 7.0  # another process: another monotonic origin
    leader, follower = QueueLocks(30.0, leader_clock), QueueLocks(30.0, follower_clock)
    leader.lock("g", "A", conn(), [("T", 0)])
    leader_clock.now += 10.0
    leader.lock("g", "B", conn(), [("T", 1)])
    follower.replace(leader.snapshot())  # A has 20 s left, B 30 s
    assert follower.lock("g", "A", conn(), [("T", 0)])[0] == [("T", 0)]  # its holder: at once (renewed to 30 s)
    assert [(t, q, o) for t, q, o in follower.lock("g", "C", conn(), [("T", 1)])[1]] == [("T", 1, "B")]
    follower_clock.now += 30.5  # B's lease would have ended on the leader by now
    assert follower.lock("g", "C", conn(), [("T", 1)])[0] == [("T", 1)]
    assert follower.owner("g", "T", 0) is None  # A's renewal ran out too
    follower.replace([])
    assert follower.snapshot() == []


def test_a_copied_lease_is_not_kept_alive_by_its_holders_heartbeats_unless_it_locks_it_again() -> None:
    """A holder that released a queue to the dead leader must not keep it from its new owner by heartbeating."""
    clock = Clock()
    leader, follower = QueueLocks(30.0, clock), QueueLocks(30.0, clock)
    leader.lock("g", "A", conn(), [("T", 0), ("T", 1)])
    follower.replace(leader.snapshot())
    follower.lock("g", "A", conn(), [("T", 0)])  # A still wants queue 0; queue 1 it released to the old leader
    for _ in range(4):
        clock.now += 10.0
        follower.renew("g", "A")
    assert follower.owner("g", "T", 0) == "A"
    assert follower.lock("g", "B", conn(), [("T", 1)])[0] == [("T", 1)]
