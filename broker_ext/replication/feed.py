"""The leader's side of replication: serving ``REPLICA_FETCH``, tracking each follower's progress, holding sync
sends until the in-sync followers stored them, and proposing who is in sync.

A follower's fetch from offset O says it stores everything before O: that is its acknowledgement. A sync send
ending at E is answered once every other *confirmed* in-sync replica acknowledged E (or after
``replication_timeout_s`` with ``REPLICATION_TIMEOUT``, not acknowledged). Who is in sync changes only through
the name server (compare-and-set on the epoch): the leader proposes — a follower joins once it fetched recently
and is within ``replica_lag_bytes`` of the log end, leaves once it did not fetch for ``replica_lag_s`` or fell
further behind — and acts on the set the name server confirmed, so a replica it stopped waiting for can no longer
be elected. With the name server unreachable, sends wait for every confirmed follower as before.

The same point bounds what consumers read on a sync leader (``confirmed_offset``, the store's ``readable_end``): a
message no in-sync follower holds yet is not served, so a consumer never reads what a new leader may not hold and
its producer, answered a timeout, sends again. The long polls of a queue wake once the point passes what was
appended to it (``wake``), not at the append. A term starts confirmed up to the log end its leader took over with
(an elected replica was in sync: every acknowledged message is in it); the point never goes back within a term.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from graymq.broker_ext.config import BrokerSettings
from graymq.broker_ext.replication.role import ReplicaRole
from graymq.broker_ext.replication.state import ReplicaState
from graymq.broker_ext.store import MessageStore
from graymq.broker_ext.store.replica_log import read_chunk
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.errors import NotLeaderError, ReplicationTimeoutError
from graymq.protocol.remoting import response_envelope

MAX_CHUNK = 4 << 20
STATE_EVERY_S = 0.5  # the leader's consumer and delay offsets go to followers at most this often


@dataclass
class Follower:
    offset: int = 0  # everything before it is stored there
    fetched_at: float = 0.0  # monotonic


class ReplicaFeed:
    """``settings``: its name, ``replication_timeout_s`` and the in-sync limits (``replica_lag_s``,
    ``replica_lag_bytes``); ``state``: what a fetch carries besides the log; ``notify``: wakes the long polls of a
    queue (``PullRequestHoldService.notify``)."""

    def __init__(self, settings: BrokerSettings, role: ReplicaRole, store: MessageStore, state: ReplicaState,
                 notify: Callable[[str, int], None]) -> None:
        self.settings = settings
        self.role = role
        self.store = store
        self.state = state
        self._notify = notify
        self._confirmed = 0  # this term's confirmed offset so far (it only grows)
        self._unconfirmed: deque[tuple[int, str, int]] = deque()  # (end offset, topic, queue id) not woken yet
        self.followers: dict[int, Follower] = {}
        # (end offset, tiebreak, future, its timeout's timer): a heap; an answered send's timer is cancelled, so
        # neither it nor what waits on the future (the response) outlives the answer
        self._waiters: list[tuple[int, int, asyncio.Future[None], asyncio.TimerHandle]] = []
        self._order = itertools.count()
        self._new_data = asyncio.Event()

    # -- the log grows -------------------------------------------------------------------------
    def appended(self) -> None:
        """Wake the followers' long polls."""
        self._new_data.set()

    def acked(self, end_offset: int) -> asyncio.Future[None] | None:
        """Sync replication: a future resolved once the in-sync followers stored up to ``end_offset`` (``None``:
        nothing to wait for); it fails with ``REPLICATION_TIMEOUT`` after ``replication_timeout_s``."""
        if not self.role.sync or self._stored_by_all(end_offset):
            return None
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        timeout = self.settings.replication_timeout_s
        timer = loop.call_later(timeout, _expire, future, end_offset, timeout)
        heapq.heappush(self._waiters, (end_offset, next(self._order), future, timer))
        return future

    def _stored_by_all(self, end_offset: int) -> bool:
        stored = self._in_sync_stored()
        return stored is None or stored >= end_offset

    def _in_sync_stored(self) -> int | None:
        """The offset every other in-sync replica acknowledged (``None``: no other is in sync)."""
        me, followers = self.role.replica_id, self.followers
        return min((followers.get(r, Follower()).offset for r in self.role.in_sync if r != me), default=None)

    def confirmed_offset(self) -> int:
        """Where consumers' reads stop. On a sync leader, what every in-sync follower stored (at least what it was
        at this term's start or last call; the log end when no follower is in sync). On a sync replica that does
        not lead, what it last confirmed as leader: consumers read from the leader, and a deposed leader does not
        serve the tail it is about to move aside. Elsewhere (async, unreplicated) the log end."""
        end, role = self.store.max_physical_offset, self.role
        if not role.sync:
            return end
        if role.leads:
            stored = self._in_sync_stored()
            self._confirmed = max(self._confirmed, end if stored is None else stored)
        self._confirmed = min(end, self._confirmed)
        return self._confirmed

    def listed_end(self) -> int | None:
        """Where GET_MAX_OFFSET stops counting: on a sync leader its confirmed offset (a consumer's or a Spark
        planner's end is what it may read); elsewhere every message stored (None) — a follower's answer says what
        it holds, and consumers read the leader."""
        return self.confirmed_offset() if self.role.sync and self.role.leads else None

    def wake(self, end_offset: int, topic: str, queue_id: int) -> None:
        """An append to the queue ended at ``end_offset``: wake its long polls once consumers may read it."""
        if not self._unconfirmed and self.confirmed_offset() >= end_offset:
            self._notify(topic, queue_id)
        else:
            self._unconfirmed.append((end_offset, topic, queue_id))

    def _release(self) -> None:
        """Answer every waiting send the in-sync followers now hold (in log order); wake the long polls of the
        queues written up to the confirmed offset."""
        waiters = self._waiters
        while waiters and (waiters[0][2].done() or self._stored_by_all(waiters[0][0])):
            _, _, future, timer = heapq.heappop(waiters)
            timer.cancel()
            if not future.done():
                future.set_result(None)
        unconfirmed = self._unconfirmed
        if unconfirmed:
            confirmed = self.confirmed_offset()
            while unconfirmed and unconfirmed[0][0] <= confirmed:
                _, topic, queue_id = unconfirmed.popleft()
                self._notify(topic, queue_id)

    def in_sync_confirmed(self) -> None:
        """The name server stored a new in-sync set: sends no longer wait for a replica that left it."""
        self._release()

    def reset(self) -> None:
        """A new term: followers start unknown; sends still waiting fail (their outcome is unknown). As leader,
        reads are confirmed up to the log end and the long polls held for it wake; else they are left to time out."""
        self.followers.clear()
        unconfirmed, self._unconfirmed = self._unconfirmed, deque()
        if self.role.leads:
            self._confirmed = self.store.max_physical_offset
            for _, topic, queue_id in unconfirmed:
                self._notify(topic, queue_id)
        for _, _, future, timer in self._waiters:
            timer.cancel()
            if not future.done():
                future.set_exception(NotLeaderError(self.role.not_leader_text()))
        self._waiters.clear()

    # -- the followers -------------------------------------------------------------------------
    async def fetch(self, req: pb.ReplicaFetchRequest) -> bytes:
        role = self.role
        if not role.leads or not role.replicated:
            raise NotLeaderError(role.not_leader_text())
        if req.epoch != role.epoch or req.broker_name != self.settings.name:
            raise NotLeaderError(f"broker {self.settings.name} replica {role.replica_id} leads epoch {role.epoch}; "
                                 f"replica {req.replica_id} of {req.broker_name} asked under epoch {req.epoch}")
        follower = self.followers.setdefault(req.replica_id, Follower())
        follower.offset, follower.fetched_at = req.offset, time.monotonic()
        self._release()
        store = self.store
        max_bytes = max(1, min(req.max_bytes or MAX_CHUNK, MAX_CHUNK))
        chunk = read_chunk(store, req.offset, max_bytes)
        if not chunk.data and chunk.next_offset == req.offset and req.wait_ms > 0:
            self._new_data.clear()
            try:
                await asyncio.wait_for(self._new_data.wait(), min(req.wait_ms, 5_000) / 1000)
            except TimeoutError:
                pass
            chunk = read_chunk(store, req.offset, max_bytes)
        version = int(time.monotonic() / STATE_EVERY_S)
        state = self.state.encode() if version != req.state_version else b""
        return response_envelope(pb.REPLICA_FETCH, pb.ReplicaFetchResponse(
            epoch=role.epoch, data=chunk.data, next_offset=chunk.next_offset, leader_end=store.max_physical_offset,
            segment_size=store.commitlog.segment_size, state_version=version, state=state))

    def proposal(self) -> list[int]:
        """Who should be in sync now: this leader, and each follower that fetched within ``replica_lag_s`` and is
        within ``replica_lag_bytes`` of the log end."""
        settings, now = self.settings, time.monotonic()
        end = self.store.max_physical_offset
        fresh = [r for r, f in self.followers.items()
                 if now - f.fetched_at <= settings.replica_lag_s and end - f.offset <= settings.replica_lag_bytes]
        return sorted({self.role.replica_id, *fresh})

    def lag(self) -> dict[int, int]:
        """Bytes each follower is behind the log end."""
        end = self.store.max_physical_offset
        return {r: max(0, end - f.offset) for r, f in self.followers.items()}


def _expire(future: asyncio.Future[None], end_offset: int, timeout: float) -> None:
    if not future.done():
        future.set_exception(ReplicationTimeoutError(
            f"the in-sync followers did not store up to offset {end_offset} within {timeout:g} s"))
