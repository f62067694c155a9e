"""The leader's side of replication: serving ``REPLICA_FETCH``, tracking each follower's progress, holding sync
sends until the in-sync followers stored them, and proposing who is in sync.

A follower's fetch from offset O says it stores everything before O: that is its acknowledgement. A sync send
ending at E is answered once every other *confirmed* in-sync replica acknowledged E (or after
``replication_timeout_s`` with ``REPLICATION_TIMEOUT``, not acknowledged). Who is in sync changes only through
the name server (compare-and-set on the epoch): the leader proposes — a follower joins once it fetched recently
and is within ``replica_lag_bytes`` of the log end, leaves once it did not fetch for ``replica_lag_s`` or fell
further behind — and acts on the set the name server confirmed, so a replica it stopped waiting for can no longer
be elected. With the name server unreachable, sends wait for every confirmed follower as before.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
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
    ``replica_lag_bytes``); ``state``: what a fetch carries besides the log."""

    def __init__(self, settings: BrokerSettings, role: ReplicaRole, store: MessageStore, state: ReplicaState) -> None:
        self.settings = settings
        self.role = role
        self.store = store
        self.state = state
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
        me = self.role.replica_id
        return all(self.followers.get(r, Follower()).offset >= end_offset for r in self.role.in_sync if r != me)

    def _release(self) -> None:
        """Answer every waiting send the in-sync followers now hold (in log order)."""
        waiters = self._waiters
        while waiters and (waiters[0][2].done() or self._stored_by_all(waiters[0][0])):
            _, _, future, timer = heapq.heappop(waiters)
            timer.cancel()
            if not future.done():
                future.set_result(None)

    def in_sync_confirmed(self) -> None:
        """The name server stored a new in-sync set: sends no longer wait for a replica that left it."""
        self._release()

    def reset(self) -> None:
        """A new term as leader: followers start unknown; sends still waiting fail (their outcome is unknown)."""
        self.followers.clear()
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
