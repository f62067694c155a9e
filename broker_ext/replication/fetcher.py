"""The follower's side of replication: copy the leader's log from this replica's own log end, chunk after chunk
(long polls when nothing is new), and take the leader's consumer and delay offsets and queue leases as they come.

Each fetch names the follower's epoch; a leader of another epoch refuses it, and the follower waits for its lease
loop to learn the new leader. A chunk that does not fit (a gap, a damaged record, another segment size) is not
written; the error is logged and the fetch repeated.
"""

from __future__ import annotations

import asyncio
import logging

from graymq.broker_ext.replication.role import ReplicaRole
from graymq.broker_ext.replication.state import ReplicaState
from graymq.broker_ext.store import MessageStore
from graymq.broker_ext.store.replica_log import Chunk, ReplicationError, apply_chunk
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.aio import cancel_and_wait
from graymq.protocol.broker_client import BrokerClient
from graymq.protocol.errors import GrayMQError
from graymq.protocol.retry import ThrottledLog
from graymq.protocol.tls import broker_tls

log = logging.getLogger(__name__)

WAIT_MS = 500
RETRY_S = 0.2
MAX_BYTES = 4 << 20


class ReplicaFetcher:
    """Fetches as broker ``broker_name`` with ``token`` (a principal with the broker right)."""

    def __init__(self, broker_name: str, token: str, role: ReplicaRole, store: MessageStore,
                 state: ReplicaState) -> None:
        self.broker_name = broker_name
        self.role = role
        self.store = store
        self.state = state
        self._client = BrokerClient(token=token, tls=broker_tls())
        self._task: asyncio.Task[None] | None = None
        self._target: tuple[str, int] | None = None  # (leader address, epoch)
        self._state_version = 0
        self._log = ThrottledLog(log, 10.0)
        self.leader_end = 0  # the leader's log end, as last heard
        self.leases_copied = False  # the leader's queue leases arrived since this replica last changed leader

    def follow(self, address: str, epoch: int) -> None:
        """Copy from the leader at ``address`` under ``epoch`` (restarts the loop when either changed)."""
        if self._target == (address, epoch) and self._task is not None and not self._task.done():
            return
        if self._task is not None:
            self._task.cancel()
        if self._target is not None and self._target[0] != address:
            self.leases_copied = False
        self._target = (address, epoch)
        self._task = asyncio.get_running_loop().create_task(self._run(address, epoch), name="replica-fetch")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task, self._target = None, None

    async def close(self) -> None:
        await self.stop()
        await self._client.close()

    async def _run(self, address: str, epoch: int) -> None:
        name, role, store = self.broker_name, self.role, self.store
        log.info("broker %s replica %d copies the log of %s (epoch %d) from offset %d", name,
                 role.replica_id, address, epoch, store.max_physical_offset)
        while True:
            offset = store.max_physical_offset
            req = pb.ReplicaFetchRequest(broker_name=name, replica_id=role.replica_id, epoch=epoch,
                                         offset=offset, max_bytes=MAX_BYTES, wait_ms=WAIT_MS,
                                         state_version=self._state_version)
            try:
                resp = await self._client.call(address, pb.REPLICA_FETCH, req, pb.ReplicaFetchResponse,
                                               timeout_s=WAIT_MS / 1000 + 5.0)
                apply_chunk(store, offset, Chunk(resp.data, resp.next_offset), resp.segment_size)
            except (GrayMQError, ReplicationError) as exc:
                self._log.warning((address, exc.code), "replica %d of %s: fetching from %s failed: %s; retrying",
                                  role.replica_id, name, address, exc.message)
                await asyncio.sleep(RETRY_S)
                continue
            except OSError as exc:
                self._log.warning((address, "os"), "replica %d of %s: writing what %s sent failed: %s; retrying",
                                  role.replica_id, name, address, exc)
                await asyncio.sleep(RETRY_S)
                continue
            self.leader_end = resp.leader_end
            if resp.state:
                self.leases_copied = self.state.apply(resp.state) or self.leases_copied
                self._state_version = resp.state_version
