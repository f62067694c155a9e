"""Queue leases of consumer groups: who may pull and commit each queue, so a queue changes hands only after
its previous owner committed what it processed and let it go.

A lease is taken with ``LOCK_QUEUES`` and lasts ``ttl_s``; the owner's heartbeats and pulls renew it. It
ends when the owner releases it (``UNLOCK_QUEUES``, which commits the owner's final offsets first), when
the owner leaves the group or its connection closes (a process killed with -9 included: its kernel closes
the socket), and otherwise when it expires: a stopped or partitioned owner holds its queues at most ``ttl_s``.
A queue without a live lease may be pulled by anyone (clients that do not take leases: pull consumers,
Spark jobs).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from graymq.protocol.connection import Connection

QueueKey = tuple[str, str, int]  # (group, topic, queue id)
_LEASES = "queue_leases"  # connection attribute: the (group, client id) pairs holding leases through it


@dataclass(slots=True)
class Lease:
    client_id: str
    connection: Connection | None
    expires_at: float
    copied: bool = False  # taken over from a predecessor's table: heartbeats do not extend it, a re-lock does


NEW_LEADER = "(a new leader: its predecessor's leases run out first)"  # the owner named while ``grant_after``
POP_CONSUMERS = "(pop consumers: messages in flight or within their invisible time)"  # the owner named while
# ``pop_busy`` says stock clients of the group receive from the queue: a queue has one kind of consumer at a time


class QueueLocks:
    def __init__(self, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._leases: dict[QueueKey, Lease] = {}
        self._by_client: dict[tuple[str, str], set[QueueKey]] = {}
        self._granted_from = 0.0  # no lease is granted before (a new leader of a broker set: see ``grant_after``)
        self.pop_busy: Callable[[str, str, int], bool] = lambda group, topic, queue_id: False

    def grant_after(self, when: float) -> None:
        """Grant no new lease before ``when`` (this clock): a broker set's new leader does not know the leases its
        predecessor granted, so their owners get one lease period to finish or renew here first."""
        self._granted_from = when

    def snapshot(self) -> list[tuple[str, str, int, str, float]]:
        """Every live lease as (group, topic, queue id, client id, seconds left): what a broker set's leader gives
        its followers, so a new leader knows who held what and until when."""
        now = self._clock()
        return [(*key, lease.client_id, lease.expires_at - now) for key, lease in self._leases.items()
                if lease.expires_at >= now]

    def replace(self, items: Iterable[tuple[str, str, int, str, float]]) -> None:
        """Take every (group, topic, queue id, client id, seconds left) as the whole table (a follower, from its
        leader): held through no connection here, they end when they would have on the leader unless renewed."""
        now = self._clock()
        self._leases = {}
        self._by_client = {}
        for group, topic, queue_id, client_id, left_s in items:
            self._leases[(group, topic, queue_id)] = Lease(client_id, None, now + left_s, copied=True)
            self._by_client.setdefault((group, client_id), set()).add((group, topic, queue_id))

    def owner(self, group: str, topic: str, queue_id: int) -> str | None:
        """The client holding the queue's live lease, or ``None``."""
        lease = self._leases.get((group, topic, queue_id))
        if lease is None:
            return None
        if lease.expires_at < self._clock():
            self._drop((group, topic, queue_id), lease)
            return None
        return lease.client_id

    def check(self, group: str, topic: str, queue_id: int, client_id: str) -> str | None:
        """The other client holding the queue, or ``None`` when ``client_id`` may use it (renewing its lease)."""
        lease = self._leases.get((group, topic, queue_id))
        if lease is None:
            return None
        now = self._clock()
        if lease.expires_at < now:
            self._drop((group, topic, queue_id), lease)
            return None
        if lease.client_id != client_id:
            return lease.client_id
        lease.expires_at = now + self.ttl_s
        return None

    def lock(self, group: str, client_id: str, connection: Connection | None,
             queues: Iterable[tuple[str, int]]) -> tuple[list[tuple[str, int]], list[tuple[str, int, str]]]:
        """Take or renew the leases of ``queues``: (locked queues, [(topic, queue, owner)] held by others)."""
        locked: list[tuple[str, int]] = []
        held: list[tuple[str, int, str]] = []
        now = self._clock()
        expires_at = now + self.ttl_s
        for topic, queue_id in queues:
            other = self.check(group, topic, queue_id, client_id)
            if other is None and now < self._granted_from and (group, topic, queue_id) not in self._leases:
                other = NEW_LEADER
            if other is None and (group, topic, queue_id) not in self._leases and self.pop_busy(group, topic, queue_id):
                other = POP_CONSUMERS
            if other is not None:
                held.append((topic, queue_id, other))
                continue
            key = (group, topic, queue_id)
            lease = self._leases.get(key)
            if lease is None:
                self._leases[key] = Lease(client_id, connection, expires_at)
                self._by_client.setdefault((group, client_id), set()).add(key)
            else:
                lease.connection, lease.copied = connection, False
            if connection is not None:
                pairs = connection.attributes.setdefault(_LEASES, set())
                assert isinstance(pairs, set)
                pairs.add((group, client_id))
            locked.append((topic, queue_id))
        return locked, held

    def unlock(self, group: str, client_id: str, topic: str, queue_id: int) -> bool:
        """Release the queue if ``client_id`` holds it (or nobody does); False when another client does."""
        key = (group, topic, queue_id)
        lease = self._leases.get(key)
        if lease is None:
            return True
        if lease.client_id != client_id:
            return self.owner(group, topic, queue_id) is None
        self._drop(key, lease)
        return True

    def renew(self, group: str, client_id: str) -> None:
        """Extend every lease ``client_id`` holds in ``group`` (its heartbeat). A lease copied from a predecessor
        is left to run out unless its holder locks it again: the holder may have released it to the dead leader
        (its heartbeats would otherwise keep a queue it no longer pulls from the consumer it now belongs to)."""
        expires_at = self._clock() + self.ttl_s
        for key in self._by_client.get((group, client_id), ()):
            lease = self._leases[key]
            if not lease.copied:
                lease.expires_at = expires_at

    def release_client(self, group: str, client_id: str) -> int:
        """Drop every lease of a client that left the group; how many."""
        keys = self._by_client.pop((group, client_id), set())
        for key in keys:
            self._leases.pop(key, None)
        return len(keys)

    def connection_closed(self, connection: Connection) -> list[str]:
        """Drop the leases held through ``connection``; the groups that lost some."""
        groups = []
        pairs = connection.attributes.get(_LEASES)
        for group, client_id in pairs if isinstance(pairs, set) else ():
            keys = self._by_client.get((group, client_id), set())
            mine = [key for key in keys if self._leases[key].connection is connection]
            for key in mine:
                self._drop(key, self._leases[key])
            if mine:
                groups.append(group)
        return groups

    def drop_topic(self, topic: str) -> None:
        for key, lease in [(k, v) for k, v in self._leases.items() if k[1] == topic]:
            self._drop(key, lease)

    def _drop(self, key: QueueKey, lease: Lease) -> None:
        self._leases.pop(key, None)
        keys = self._by_client.get((key[0], lease.client_id))
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_client[(key[0], lease.client_id)]
