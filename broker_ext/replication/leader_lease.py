"""A replica's heartbeat to the name server (``POST /v1/brokers/replicas/heartbeat``) every quarter lease, and what
it does with the answer: lead, follow, or step down.

- Elected (the answer names this replica at a new epoch): stop copying and rebuild the producer table from the
  log (so a retry of a send the old leader stored is recognized), only then take writes; the delay schedule is
  recounted and resumed, the followers' progress starts over. Queue leases copied from the predecessor hold on
  (their owners re-lock at once, others wait until they would have ended); a replica that copied none (it never
  followed this epoch's predecessor) grants leases only after one lease period.
- Following (another replica leads): refuse writes, stop the delay schedule, and — when the epoch is new — move
  aside whatever this log holds past the new leader's start offset (``replica_log.move_aside``: counted, logged,
  kept for re-publishing), then copy from the leader.
- Leading on: propose the in-sync set (``ReplicaFeed.proposal``) and act on the one the name server confirms.

Unreachable name servers: a leader keeps serving until its lease ends (``ReplicaRole.fence``: then it
acknowledges nothing until a renewal reaches the name server; sync sends still wait for every confirmed follower),
a follower keeps copying.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import httpx

from graymq.broker_ext.broker_controller import BrokerController
from graymq.broker_ext.replication.health import ReplicaHealth
from graymq.broker_ext.store.replica_log import move_aside
from graymq.nameserver_api.client import http_error_text
from graymq.protocol.supervisor import Supervisor
from graymq.protocol.tls import https_verify

log = logging.getLogger(__name__)

FIRST_INTERVAL_S = 0.25  # until the name server says how long the lease is
# The part of a lease a leader gives up (ends early): the name server's lease starts when it receives the renewal
# (after this replica sent it) on its wall clock, which NTP may slew or step; a tenth covers that with room while
# renewals every quarter lease leave a healthy leader far from the end.
LEASE_MARGIN = 0.1


class ReplicaLease:
    def __init__(self, broker: BrokerController, urls: list[str], on_lead: Callable[[], None] = lambda: None) -> None:
        self.broker = broker
        self.urls = urls
        self._on_lead = on_lead  # e.g. register at once: the routes point at this replica from now on
        token = broker.settings.token.strip()
        headers = {"Authorization": f"Bearer {token}"} if token else None
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(2.0, connect=1.0), headers=headers,
                                         verify=https_verify())
        self._supervisor = Supervisor(f"broker {broker.name} replica lease", lambda exc, where: log.error(
            "%s ended: %s", where, exc.message))
        self._task: asyncio.Task[None] | None = None
        self._failing = False
        self._refusal: str | None = None  # why the name server refused the last heartbeat (401, 403)
        self.interval_s = FIRST_INTERVAL_S
        self._health = ReplicaHealth()

    def start(self) -> None:
        self._task = self._supervisor.spawn("replica-lease", self._run)

    def _failed(self, url: str, exc: httpx.HTTPError | ValueError) -> None:
        """A refused heartbeat (401, 403: the token does not cover this replica) is an ERROR line with the name
        server's reason and fix, again only when the reason changes; any other failure a WARNING, once."""
        if isinstance(exc, httpx.HTTPStatusError) and exc.response.status_code in (401, 403):
            why = http_error_text(exc)
            if why != self._refusal:
                log.error("broker %s replica %d takes no part in its set (no lease, no election): name server %s "
                          "refused its replica heartbeat: %s", self.broker.name, self.broker.role.replica_id, url, why)
            self._refusal = why
        elif not self._failing:
            log.warning("replica heartbeat to name server %s failed: %s", url,
                        http_error_text(exc) if isinstance(exc, httpx.HTTPError) else exc)

    async def stop(self) -> None:
        await self._supervisor.cancel([self._task] if self._task else [])
        await self._client.aclose()

    async def _run(self) -> None:
        while True:
            sent_at = time.monotonic()
            answer = await self._beat()
            if answer is not None:
                await self.apply(answer, sent_at)
            await asyncio.sleep(self.interval_s)

    def _body(self) -> dict[str, Any]:
        broker, role = self.broker, self.broker.role
        return {"broker_name": broker.name, "replica_id": role.replica_id, "address": broker.address,
                "replication": role.replication, "epoch": role.epoch,
                "log_end_offset": broker.store.max_physical_offset,
                "in_sync": broker.feed.proposal() if role.leads else None}

    async def _beat(self) -> dict[str, Any] | None:
        for url in self.urls:
            try:
                response = await self._client.post(f"{url}/v1/brokers/replicas/heartbeat", json=self._body())
                response.raise_for_status()
                answer = response.json()
                if not isinstance(answer, dict):
                    raise ValueError("the answer is not a JSON object")
            except (httpx.HTTPError, ValueError) as exc:
                self._failed(url, exc)
                continue
            if self._failing:
                log.info("replica heartbeats reach the name server again")
            self._failing, self._refusal = False, None
            return answer
        self._failing = True
        return None

    async def apply(self, answer: dict[str, Any], sent_at: float) -> None:
        """Act on the name server's answer to the heartbeat sent at ``sent_at`` (monotonic): a leader's lease ends
        ``lease_seconds`` (less ``LEASE_MARGIN``) after it asked, before the name server could elect another."""
        broker, role = self.broker, self.broker.role
        epoch, leader = int(answer["epoch"]), int(answer["leader_replica_id"])
        if epoch < role.epoch:
            return  # an answer older than what this replica knows
        lease_s = float(answer.get("lease_seconds", 4.0))
        self.interval_s = max(0.05, lease_s / 4)
        new_epoch = epoch != role.epoch
        was_leading = role.leads and role.leader_id is not None
        role.leader_address = str(answer.get("leader_address", ""))
        role.epoch_start_offset = int(answer.get("epoch_start_offset", 0))
        if leader == role.replica_id:
            taking_over = new_epoch or not was_leading
            if taking_over:  # while the role still refuses writes: a send let in meanwhile would miss the table
                await self._prepare_to_lead()
            role.know_epoch(epoch)
            role.leader_id = leader
            role.in_sync = frozenset(int(r) for r in answer.get("in_sync", ()))
            role.lease_ends_at = sent_at + lease_s * (1 - LEASE_MARGIN)
            if taking_over:
                self._lead()
            broker.feed.in_sync_confirmed()
            self._health.observe(role, answer)
            return
        if was_leading or new_epoch or role.leader_id != leader:
            await self._follow(epoch, leader, new_epoch)
        role.in_sync = frozenset(int(r) for r in answer.get("in_sync", ()))
        self._health.observe(role, answer)
        if role.leader_address:
            broker.fetcher.follow(role.leader_address, epoch)

    async def _prepare_to_lead(self) -> None:
        """Stop copying, then enter every request the log holds in the producer table — all before the role takes
        writes, since the await lets other requests run: a producer's retry of a send the old leader stored and
        this replica copied, reaching it then, would be stored a second time."""
        await self.broker.fetcher.stop()
        self.broker.producers.rebuild(self.broker.store)

    def _lead(self) -> None:
        """Take over, the role leading already (no await: nothing runs between that and the end of this)."""
        broker, role = self.broker, self.broker.role
        broker.feed.reset()
        broker.schedule.resume()
        if role.epoch > 1 and not broker.fetcher.leases_copied:  # its predecessor's leases are unknown here
            broker.locks.grant_after(time.monotonic() + broker.settings.queue_lease_s)
        role.leading_since = time.monotonic()
        log.warning("broker %s replica %d leads at epoch %d (its log ends at %d)", broker.name, role.replica_id,
                    role.epoch, broker.store.max_physical_offset)
        self._on_lead()

    async def _follow(self, epoch: int, leader: int, new_epoch: bool) -> None:
        broker, role = self.broker, self.broker.role
        role.leader_id = leader
        broker.feed.reset()
        broker.schedule.pause()
        await broker.fetcher.stop()
        if new_epoch and broker.store.max_physical_offset > role.epoch_start_offset:
            role.moved_aside_bytes += move_aside(broker.store, role.epoch_start_offset,
                                                 broker.settings.store_dir / "moved-aside", epoch)
            broker.producers.rebuild(broker.store)
        role.know_epoch(epoch)
        log.warning("broker %s replica %d follows replica %d (%s) at epoch %d", broker.name, role.replica_id,
                    leader, role.leader_address, epoch)
