"""PushConsumer: rebalance with AllocateMessageQueueGray, long-polling pulls, listener, offsets, drain-then-flip.

It wires three parts: the assignment table (``assignment``: the queues held, their batches), the
rebalancer (group view, allocation, leases, the hand-over) and the fetcher (pull loops, dispatch,
send-back, commits); following the desired flag is decided by ``GrayFlip``, done by ``FlipRunner``.

Failures never stop it silently. A broker call that fails in a loop (pull, commit, heartbeat,
rebalance) is logged at WARNING naming topic, queue and broker (the same warning at most every
30 s) and retried with a capped, jittered backoff; a loop that raises unexpectedly is logged at
ERROR and restarted. A permanent error (``GrayMQError.permanent``: no permission, an invalid
request) or a deleted topic ends the consumer instead: see ``failure``. A record that does not
decode is skipped, logged at ERROR and counted in ``skipped_records``; the queue flows on.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from graymq.client.config import client_config
from graymq.client.consumer.assignment import Assignment
from graymq.client.consumer.broker_heartbeats import CONSUME_FROM, BrokerHeartbeats
from graymq.client.consumer.consume_service import Listener, ListenerRunner
from graymq.client.consumer.fetcher import Fetcher
from graymq.client.consumer.flip_runner import FlipRunner
from graymq.client.consumer.health import ConsumeHealth
from graymq.client.consumer.offset_store import LocalFileOffsetStore, OffsetStore, RemoteOffsetStore
from graymq.client.consumer.queue_leases import QueueLeases
from graymq.client.consumer.rebalancer import Rebalancer
from graymq.client.consumer.runtime import ConsumerRuntime
from graymq.client.consumer.settings import ConsumeOptions, ConsumerSettings, apply_keywords
from graymq.client.consumer.start_offset import StartOffsets
from graymq.client.instance import ClientInstance
from graymq.client.message import MessageQueue
from graymq.core.allocate import AllocateMessageQueueAveragely, AllocateMessageQueueStrategy
from graymq.core.gray_flip import GrayFlip
from graymq.core.group_gray import GroupGray
from graymq.nameserver_api.membership import Membership, new_client_id
from graymq.protocol.constants import retry_topic
from graymq.protocol.errors import BadRequestError, GrayMQError
from graymq.protocol.membership import ClientState, OrphanPolicy
from graymq.protocol.supervisor import Supervisor

log = logging.getLogger(__name__)


class PushConsumer:
    """Async push consumer; ``subscribe()`` then ``await start()``; ``await stop()`` commits offsets.

    When a permanent error ends it (no permission, an invalid subscription, its topic deleted), it
    logs one ERROR line naming the cause, stops consuming, commits its offsets and leaves the group
    so the other consumers take its queues over. The application sees the cause in ``failure``
    (None while healthy) and can ``await wait_failed()``; ``start()`` raises it when it happens at
    once. ``stop()`` is still safe to call (it waits for that stop to end). ``skipped_records``
    counts the damaged records skipped, ``consumed`` the messages consumed.

    How it consumes (broadcasting, consume_from, consume_timestamp_ms, orderly, offset_dir) comes from
    ``options`` and its tuning (batch sizes, threads, intervals, the drain timeout) from ``settings``; a
    field of either given as a keyword argument takes precedence (an unknown one raises ``TypeError``).
    ``config=`` (a ``ClientConfig``) replaces ``nameserver`` and ``token``: the clients given one share its
    name-server client, route cache and broker connections. ``lane=`` declares the lane it starts in (``gray=True``
    is the lane ``gray``; the name server's flags and rules come first).
    """

    def __init__(
        self,
        group: str,
        nameserver: str | list[str] | None = None,
        *,
        listener: Listener,
        client_id: str | None = None,
        labels: dict[str, str] | None = None,
        gray: bool | None = None,
        allocate_strategy: AllocateMessageQueueStrategy | None = None,
        orphan_policy: OrphanPolicy | None = None,
        token: str | None = None,
        options: ConsumeOptions | None = None,
        settings: ConsumerSettings | None = None,
        **keywords: Any,
    ) -> None:
        config = keywords.pop("config", None)  # keywords, so the parameters stay within twelve
        lane: str | None = keywords.pop("lane", None)
        self.options, self.settings = o, s = apply_keywords(options, settings, keywords)
        if o.consume_from not in CONSUME_FROM:
            raise BadRequestError(f"consume_from must be one of {sorted(CONSUME_FROM)}, got {o.consume_from!r}")
        self.group, self.client_id = group, client_id or new_client_id("consumer")
        self.broadcasting, self.orderly = o.broadcasting, o.orderly
        self.consume_from, self.consume_timestamp_ms = o.consume_from, o.consume_timestamp_ms
        self.base_strategy = allocate_strategy or AllocateMessageQueueAveragely()
        self.orphan_policy_override = orphan_policy
        self.client = ClientInstance.of(client_config(config, nameserver, token))
        self.nameserver, self.brokers = self.client.nameserver, self.client.brokers
        self.routes = self.client.route_view()
        self.client.on_group_changed(self._on_group_changed)
        store_dir = o.offset_dir or Path("./graymq-data/offsets")
        self.offset_store: OffsetStore = (LocalFileOffsetStore(store_dir, group, self.client_id) if o.broadcasting
                                          else RemoteOffsetStore(self.brokers, group, self.client_id))
        self.flip = GrayFlip(lane or bool(gray), drain_timeout_s=s.drain_timeout_s, drain_poll_s=s.drain_poll_s)
        self._tasks = Supervisor(f"consumer {self.client_id}", self._fail)
        self.runtime = rt = ConsumerRuntime(group, self.client_id, o.broadcasting, s, self.brokers, self.routes,
                                            self.flip, self._tasks, self._fail,
                                            group_gray=GroupGray(orphan_policy=orphan_policy or "hold"))
        self.subscriptions = rt.subscriptions
        self._wire(listener, dict(labels or {}), lane or gray, orphan_policy)
        self._loops: list[asyncio.Task[None]] = []
        self._stop_task: asyncio.Task[None] | None = None
        self._failed = asyncio.Event()
        self._started = False

    def _wire(self, listener: Listener, labels: dict[str, str], gray: bool | str | None,
              orphan_policy: OrphanPolicy | None) -> None:
        """Build the parts around the shared runtime: membership, assignment, fetcher, rebalancer, flip runner."""
        rt, s, group = self.runtime, self.settings, self.group
        self._flipper: FlipRunner  # the parts wired below hear of one another through these two
        self.rebalancer: Rebalancer
        self.membership = Membership(
            self.client.session, group=group, client_id=self.client_id, role="consumer", labels=labels,
            declared_gray=gray, interval_s=s.nameserver_interval_s, report=self._report,
            on_update=lambda answer: self._flipper.on_update(answer),
            on_settings=lambda answer: self._flipper.on_settings(answer),
            on_permanent=lambda exc: self._fail(exc, "name server heartbeat"), aligned=True,
            log_failures=False)  # the instance's session logs a failed request once
        self.leases = QueueLeases(self.brokers, group, self.client_id)
        self.start_offsets = StartOffsets(self.brokers, self.offset_store, group, self.consume_from,
                                          self.consume_timestamp_ms)
        self.assignment = Assignment()
        self.heartbeats = BrokerHeartbeats(rt, self.consume_from, self.client.broker_beats)
        self._runner = ListenerRunner(listener, s.max_threads, group)
        self.fetcher = Fetcher(rt, self.assignment, self.offset_store, self._runner, orderly=self.orderly,
                               on_lost=lambda pq, exc: self.rebalancer.lost(pq, exc), rejoin=self.heartbeats.beat)
        self.rebalancer = Rebalancer(rt, self.assignment, self.fetcher, leases=self.leases,
                                     start_offsets=self.start_offsets, heartbeats=self.heartbeats,
                                     base_strategy=self.base_strategy, on_queues_changed=self.membership.poke,
                                     listings=self.client.group_listings)
        self._flipper = FlipRunner(rt, self.membership, self.rebalancer, self.fetcher, self.heartbeats,
                                   orphan_policy=orphan_policy, slots=self.nameserver)

    @property
    def gray(self) -> bool:
        """The effective flag (a draining consumer is still gray)."""
        return self.runtime.gray

    @property
    def lane(self) -> str | None:
        """The lane this consumer is in (a draining consumer still is); None for base."""
        return self.runtime.lane

    @property
    def retired(self) -> bool:
        """A gray consumer of a group whose gray side was rolled back: it holds and consumes nothing."""
        return self.runtime.retired

    @property
    def state(self) -> ClientState:
        return ClientState.RETIRED if self.retired else self.flip.gray_state.state

    @property
    def gray_switch(self) -> bool:
        return self.runtime.group_gray.switch

    @property
    def gray_weight(self) -> int:
        return self.runtime.group_gray.weight

    @property
    def gray_retired(self) -> bool:
        return self.runtime.group_gray.retired

    @property
    def orphan_policy(self) -> OrphanPolicy:
        return self.runtime.group_gray.orphan_policy

    @property
    def failure(self) -> GrayMQError | None:
        return self.runtime.failure

    @property
    def health(self) -> ConsumeHealth:
        """Per side: consumed, failed, sent back, dead-lettered, latency."""
        return self.fetcher.health

    @property
    def consumed(self) -> int:
        return self.fetcher.consumed

    @property
    def skipped_records(self) -> int:
        return self.fetcher.skipped_records

    @property
    def last_drain_error(self) -> str:
        """Why the latest drain timed out ("" when none did)."""
        return self.flip.last_drain_error

    def subscribe(self, topic: str, expression: str = "*") -> None:
        if self._started:
            raise BadRequestError("subscribe before start()")
        self.subscriptions[topic] = expression or "*"

    def assigned(self) -> list[MessageQueue]:
        return self.assignment.assigned()

    async def start(self) -> None:
        if not self.subscriptions:
            raise BadRequestError("subscribe to at least one topic before start()")
        if not self.broadcasting:
            self.subscriptions.setdefault(retry_topic(self.group), "*")
        self._started = True
        try:
            await self.membership.beat(first=True)  # learn the desired flag before taking any queue
        except GrayMQError as exc:
            self.runtime.failure = exc
            await self.stop()
            raise
        self.flip.follow_changes()
        self.client.start_membership(self.membership)
        await self.heartbeats.beat()
        if self.failure is not None:
            await self.stop()
            raise self.failure
        rebalance_now, spawn = self.runtime.rebalance_now, self._tasks.spawn
        self._loops = [spawn("rebalance", self.rebalancer.loop, on_restart=rebalance_now.set),
                       spawn("heartbeat", self.heartbeats.loop), spawn("persist", self.fetcher.persist_loop)]
        rebalance_now.set()

    async def wait_failed(self) -> GrayMQError:
        """Wait until a permanent error has ended the consumer and it has stopped; returns the cause.

        It never returns for a consumer that stays healthy (``stop()`` included): await it next to the
        application's own stop condition (``asyncio.wait(..., return_when=FIRST_COMPLETED)``).
        """
        await self._failed.wait()
        assert self.failure is not None
        return self.failure

    async def stop(self, grace_s: float = 10.0) -> None:
        """Stop pulling, give in-flight messages ``grace_s`` to finish, commit offsets, unregister.

        Each queue is handed back as a rebalance hands it over: its final offset committed and its lease
        released. Messages still unfinished after the grace period are abandoned uncommitted, so the
        group consumes them again (at-least-once). Unregistering from the brokers makes the other consumers
        take over its queues at once; from the name server, takes it out of ``gray status`` and of what
        promote and rollback wait for.
        A second call, or one while the consumer stops after a failure, waits for that stop.
        """
        if self._stop_task is None:
            self._stop_task = asyncio.get_running_loop().create_task(self._stop(grace_s), name=f"stop {self.client_id}")
            self._tasks.watch(self._stop_task)
        await asyncio.shield(self._stop_task)

    async def _stop(self, grace_s: float) -> None:
        self._flipper.cancel()
        await self._tasks.cancel(self._loops)
        await asyncio.gather(*(self.rebalancer.hand_over(pq, grace_s) for pq in self.assignment))
        await self.rebalancer.release_unused_leases(set())
        await self.assignment.abandon_batches()  # still running after the grace period: uncommitted
        await self.fetcher.flush_offsets()
        await self.heartbeats.unregister()
        await self.client.stop_membership(self.membership)
        await self.membership.unregister()
        await self.routes.close()
        await self.client.leave(self._on_group_changed)
        self._runner.shutdown()
        self._started = False

    def _fail(self, cause: GrayMQError, where: str) -> None:
        """A permanent error: log one ERROR line, then stop as ``stop()`` does (see the class docstring)."""
        if self._stop_task is not None:
            if self.failure is None:
                log.warning("consumer %s of group %s, stopping: %s failed: %s (%s)", self.client_id, self.group,
                            where, cause.message, cause.code_name)
            return
        self.runtime.failure = cause
        log.error("consumer %s of group %s failed and stops consuming: %s (%s, in %s)", self.client_id, self.group,
                  cause.message, cause.code_name, where)
        self._tasks.watch(asyncio.get_running_loop().create_task(self._halt(), name=f"halt {self.client_id}"))

    async def _halt(self) -> None:
        try:
            await self.stop()
        finally:
            self._failed.set()

    async def drain_and_flip(self, timeout_s: float | None = None) -> None:
        """Consume the gray queues dry, then become normal (withdrawing the client's own gray declaration).
        Raises ``DrainTimeoutError`` (still gray); see ``FlipRunner.drain_and_flip``."""
        await self._flipper.drain_and_flip(timeout_s)

    async def gray_backlog(self) -> int | None:
        """Unconsumed messages in the gray queues of every subscribed topic; None when a broker is unreachable."""
        return await self._flipper.gray_backlog()

    async def rebalance(self) -> None:
        """Rebalance now (the rebalancer also runs on its timer and when the group changes)."""
        await self.rebalancer.rebalance()

    def _report(self) -> dict[str, Any]:
        return {"gray": self.gray, "state": self.state, "topics": sorted(self.subscriptions),
                "queues": [str(mq) for mq in self.assigned()], "health": self.health.report(), "lane": self.lane}

    def _on_group_changed(self, group: str) -> None:
        if group == self.group:
            self.runtime.rebalance_now.set()
