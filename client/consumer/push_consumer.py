"""PushConsumer: rebalance with AllocateMessageQueueGray, long-polling pulls, listener, offsets, drain-then-flip.

The name server holds the desired flag, this client its effective flag; how it follows a change
(normal → gray at once, gray → normal after draining its gray queues) is ``GrayFlip``'s, in
``graymq.client.consumer.gray_flip``.

Failures never stop it silently. A broker call that fails in a loop (pull, commit, heartbeat,
rebalance) is logged at WARNING naming topic, queue and broker (the same warning at most every
30 s) and retried with a capped, jittered backoff; a loop that raises unexpectedly is logged at
ERROR and restarted. A permanent error (``GrayMQError.permanent``: no permission, an invalid
request) or a deleted topic ends the consumer instead: see ``failure``. A record that does not
decode is skipped, logged at ERROR and counted in ``skipped_records``; the queue flows on.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Hashable
from dataclasses import replace
from pathlib import Path
from typing import Any

from graymq.client.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueGray,
    AllocateMessageQueueStrategy,
    ConsumerView,
)
from graymq.client.backlog import BacklogUnavailable, gray_backlog
from graymq.client.broker_client import BrokerClient
from graymq.client.consumer.consume_service import Listener, ListenerRunner
from graymq.client.consumer.gray_flip import GrayFlip
from graymq.client.consumer.group_view import group_view
from graymq.client.consumer.health import ConsumeHealth
from graymq.client.consumer.offset_store import LocalFileOffsetStore, OffsetStore, RemoteOffsetStore
from graymq.client.consumer.process_queue import ProcessQueue
from graymq.client.consumer.pulled_records import decode_pulled, log_damaged
from graymq.client.consumer.queue_leases import QueueLeases
from graymq.client.consumer.settings import ConsumerSettings
from graymq.client.consumer.start_offset import ConsumeFrom, QueueToStart, StartOffsets
from graymq.client.membership import Membership, new_client_id
from graymq.client.message import MessageExt, MessageQueue
from graymq.client.nameserver_client import NameServerClient
from graymq.client.route import TopicRoute
from graymq.client.route_cache import SharedRouteCache
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.aio import wait_event
from graymq.protocol.constants import PROPERTY_RETRY_TOPIC, parse_sub_expression, retry_topic
from graymq.protocol.errors import (
    BadRequestError,
    ConnectionClosedError,
    GrayIsolationError,
    GrayMQError,
    QueueLockedError,
    QueueNotExistError,
    RequestTimeoutError,
    SubscriptionNotExistError,
    TopicNotExistError,
)
from graymq.protocol.membership import ClientState, OrphanPolicy
from graymq.protocol.retry import Backoff, ThrottledLog
from graymq.protocol.supervisor import Supervisor

log = logging.getLogger(__name__)

_FROM = {"last": pb.CONSUME_FROM_LAST_OFFSET, "first": pb.CONSUME_FROM_FIRST_OFFSET,
         "timestamp": pb.CONSUME_FROM_TIMESTAMP}
PULL_BACKOFF = (0.1, 3.0)  # seconds: first retry delay and cap of a failing pull
REBALANCE_BACKOFF = (0.5, 10.0)
LEASE_RETRY = (0.2, 2.0)  # seconds: first and longest wait before asking again for queues other clients hold
# A failed pull of these may mean the route is stale (broker moved, queues changed): ask the name server again.
_ROUTE_SUSPECT = (ConnectionClosedError, RequestTimeoutError, TopicNotExistError, QueueNotExistError)


class PushConsumer:
    """Async push consumer; ``subscribe()`` then ``await start()``; ``await stop()`` commits offsets.

    When a permanent error ends it (no permission, an invalid subscription, its topic deleted), it
    logs one ERROR line naming the cause, stops consuming, commits its offsets and leaves the group
    so the other consumers take its queues over. The application sees the cause in ``failure``
    (None while healthy) and can ``await wait_failed()``; ``start()`` raises it when it happens at
    once. ``stop()`` is still safe to call (it waits for that stop to end). ``skipped_records``
    counts the damaged records skipped, ``consumed`` the messages consumed.

    Tuning (batch sizes, threads, intervals, the drain timeout) comes from ``settings``, with
    any ``ConsumerSettings`` field given as a keyword argument taking precedence (an unknown one
    raises ``TypeError``).
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
        broadcasting: bool = False,
        consume_from: ConsumeFrom = "last",
        consume_timestamp_ms: int = 0,
        orderly: bool = False,
        allocate_strategy: AllocateMessageQueueStrategy | None = None,
        orphan_policy: OrphanPolicy | None = None,
        offset_dir: Path | None = None,
        token: str | None = None,
        settings: ConsumerSettings | None = None,
        **tuning: Any,
    ) -> None:
        if consume_from not in _FROM:
            raise BadRequestError(f"consume_from must be one of {sorted(_FROM)}, got {consume_from!r}")
        self.settings = replace(settings or ConsumerSettings(), **tuning)
        self.group = group
        self.client_id = client_id or new_client_id("consumer")
        self.broadcasting = broadcasting
        self.consume_from = consume_from
        self.consume_timestamp_ms = consume_timestamp_ms
        self.orderly = orderly
        self.base_strategy = allocate_strategy or AllocateMessageQueueAveragely()
        self.orphan_policy_override = orphan_policy
        self.orphan_policy: OrphanPolicy = orphan_policy or "hold"

        self.gray_switch = True
        self.gray_weight = 0  # percent of the normal queues the group's gray side consumes (from the name server)
        self.gray_retired = False  # the group's gray side is rolled back (from the name server)
        self._left_brokers = False  # retired: unregistered from the brokers
        self.subscriptions: dict[str, str] = {}
        self.consumed = 0
        self.skipped_records = 0
        self.health = ConsumeHealth()  # per side: consumed, failed, sent back, dead-lettered, latency
        self.failure: GrayMQError | None = None

        self.nameserver = NameServerClient(nameserver, token=token)  # token: GRAYMQ_TOKEN by default
        self.routes = SharedRouteCache(self.nameserver)
        self.brokers = BrokerClient(on_group_changed=self._on_group_changed, token=token)
        self.offset_store: OffsetStore = (
            LocalFileOffsetStore(offset_dir or Path("./graymq-data/offsets"), group, self.client_id)
            if broadcasting else RemoteOffsetStore(self.brokers, group, self.client_id)
        )
        self.leases = QueueLeases(self.brokers, group, self.client_id)
        self.start_offsets = StartOffsets(self.brokers, self.offset_store, group, consume_from, consume_timestamp_ms)
        self.membership = Membership(
            self.nameserver, group=group, client_id=self.client_id, role="consumer", labels=dict(labels or {}),
            declared_gray=gray, interval_s=self.settings.nameserver_interval_s, report=self._report,
            on_update=self._on_update, on_permanent=lambda exc: self._fail(exc, "name server heartbeat"),
        )
        self._runner = ListenerRunner(listener, self.settings.max_threads)
        self._slots = asyncio.Semaphore(self.settings.max_threads * 2)
        self._pqs: dict[MessageQueue, ProcessQueue] = {}
        self._tasks = Supervisor(f"consumer {self.client_id}", self._fail)
        self.flip = GrayFlip(self, bool(gray), self._tasks, drain_timeout_s=self.settings.drain_timeout_s,
                             drain_poll_s=self.settings.drain_poll_s)
        self._warnings = ThrottledLog(log)
        self._consuming: set[asyncio.Task[None]] = set()
        self._loops: list[asyncio.Task[None]] = []
        self._stop_task: asyncio.Task[None] | None = None
        self._failed = asyncio.Event()
        self._rebalance_now = asyncio.Event()
        self._rebalance_lock = asyncio.Lock()
        self._lease_retry = Backoff(*LEASE_RETRY)
        # queue -> where this client stopped, for queues it gave up while their broker was unreachable
        self._unreleased: dict[MessageQueue, int] = {}
        self._started = False
        # The brokers' last listings of the group (their bytes) and the view built from them; the inputs of the
        # last allocation (the routes held so their ids stay theirs) and the queues it wanted.
        self._listings: tuple[tuple[str, bytes], ...] = ()
        self._view: dict[str, tuple[bool, set[str] | None]] = {}
        self._allocation: tuple[Hashable, list[TopicRoute], dict[MessageQueue, tuple[str, bool]]] | None = None

    # -- public API --------------------------------------------------------------------------
    @property
    def gray(self) -> bool:
        """The effective flag (a draining consumer is still gray)."""
        return self.flip.gray_state.gray

    @property
    def retired(self) -> bool:
        """A gray consumer of a group whose gray side was rolled back: it holds and consumes nothing."""
        return self.gray and self.gray_retired

    @property
    def state(self) -> ClientState:
        return ClientState.RETIRED if self.retired else self.flip.gray_state.state

    @property
    def last_drain_error(self) -> str:
        """Why the latest drain timed out ("" when none did)."""
        return self.flip.last_drain_error

    def subscribe(self, topic: str, expression: str = "*") -> None:
        if self._started:
            raise BadRequestError("subscribe before start()")
        self.subscriptions[topic] = expression or "*"

    def assigned(self) -> list[MessageQueue]:
        return sorted(self._pqs)

    async def start(self) -> None:
        if not self.subscriptions:
            raise BadRequestError("subscribe to at least one topic before start()")
        if not self.broadcasting:
            self.subscriptions.setdefault(retry_topic(self.group), "*")
        self._started = True
        try:
            await self.membership.beat()  # learn the desired flag before taking any queue
        except GrayMQError as exc:
            self.failure = exc
            await self.stop()
            raise
        self.flip.follow_changes()
        self.membership.start()
        await self._heartbeat_brokers()
        if self.failure is not None:
            await self.stop()
            raise self.failure
        self._loops = [
            self._tasks.spawn("rebalance", self._rebalance_loop, on_restart=self._rebalance_now.set),
            self._tasks.spawn("heartbeat", self._heartbeat_loop),
            self._tasks.spawn("persist", self._persist_loop),
        ]
        self._rebalance_now.set()

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
        group consumes them again (at-least-once). Unregistering from the brokers makes them push
        "group changed", so the other consumers take over its queues at once; unregistering from
        the name server takes it out of ``gray status`` and of what promote and rollback wait for.
        A second call, or one while the consumer stops after a failure, waits for that stop.
        """
        if self._stop_task is None:
            self._stop_task = asyncio.get_running_loop().create_task(self._stop(grace_s), name=f"stop {self.client_id}")
            self._tasks.watch(self._stop_task)
        await asyncio.shield(self._stop_task)

    async def _stop(self, grace_s: float) -> None:
        self.flip.cancel()
        await self._tasks.cancel(self._loops)
        await asyncio.gather(*(self._release(pq, grace_s) for pq in list(self._pqs.values())))
        await self._release_unused_leases(set())
        if self._consuming:  # batches still running after the grace period are abandoned, uncommitted
            for task in list(self._consuming):
                task.cancel()
            await asyncio.gather(*self._consuming, return_exceptions=True)
        await self._flush_offsets()
        for address in self._broker_addresses():
            try:
                await self.brokers.unregister(address, self.client_id, self.group)
            except GrayMQError as exc:
                log.info("unregister from %s failed: %s", address, exc.message)
        await self.membership.stop()
        await self.membership.unregister()
        await self.routes.close()
        await self.brokers.close()
        await self.nameserver.close()
        self._runner.shutdown()
        self._started = False

    # -- failures --------------------------------------------------------------------------
    def _fail(self, cause: GrayMQError, where: str) -> None:
        """A permanent error: log one ERROR line, then stop as ``stop()`` does (see the class docstring)."""
        if self._stop_task is not None:
            if self.failure is None:
                log.warning("consumer %s of group %s, stopping: %s failed: %s (%s)", self.client_id, self.group,
                            where, cause.message, cause.code_name)
            return
        self.failure = cause
        log.error("consumer %s of group %s failed and stops consuming: %s (%s, in %s)", self.client_id, self.group,
                  cause.message, cause.code_name, where)
        self._tasks.watch(asyncio.get_running_loop().create_task(self._halt(), name=f"halt {self.client_id}"))

    async def _halt(self) -> None:
        try:
            await self.stop()
        finally:
            self._failed.set()

    def _retry_later(self, exc: GrayMQError, what: str, key: Hashable) -> bool:
        """After a failed broker call: fail the consumer when ``exc`` is permanent (False), else warn (True).

        The warning names ``what`` failed and is rate-limited by ``key`` (the same failure repeating).
        """
        if exc.permanent:
            self._fail(exc, what)
            return False
        self._warnings.warning(key, "%s failed: %s (%s); retrying", what, exc.message, exc.code_name)
        return True

    async def drain_and_flip(self, timeout_s: float | None = None) -> None:
        """Consume the gray queues dry, then become normal. Raises ``DrainTimeoutError`` (still gray).

        Called by the application, it also withdraws the client's own gray declaration, so the
        name server's desired flag follows unless an explicit flag or a rule says gray.
        """
        await self.flip.drain_and_flip(timeout_s)

    async def gray_backlog(self) -> int | None:
        """Unconsumed messages in the gray queues of every subscribed topic; None when a broker is unreachable."""
        try:
            queues = await gray_backlog(self.brokers, self.routes, self.group, self.subscriptions)
        except BacklogUnavailable as exc:
            log.info("consumer %s: %s", self.client_id, exc.message)
            return None
        return sum(q.backlog for q in queues)

    # -- name server membership ------------------------------------------------------------
    def _report(self) -> dict[str, Any]:
        return {"gray": self.gray, "state": self.state, "topics": sorted(self.subscriptions),
                "queues": [str(mq) for mq in sorted(self._pqs)], "health": self.health.report()}

    async def _on_update(self, response: dict[str, Any]) -> None:
        desired = bool(response.get("desired_gray", self.gray))
        switch = bool(response.get("gray_switch", self.gray_switch))
        policy = self.orphan_policy_override or response.get("orphan_policy") or "hold"
        weight = int(response.get("gray_weight") or 0)
        was_retired = self.retired
        self.gray_retired = bool(response.get("gray_retired"))
        if (switch, policy, weight) != (self.gray_switch, self.orphan_policy, self.gray_weight):
            self.gray_switch, self.orphan_policy, self.gray_weight = switch, policy, weight
            await self._heartbeat_brokers()  # the brokers' isolation check follows the new allocation
            self._rebalance_now.set()
        await self.flip.follow(desired)
        if self.retired != was_retired:
            await self._retirement_changed()

    async def _retirement_changed(self) -> None:
        """Retired: hand back every queue, then leave the brokers' view of the group, so the normal consumers
        see no gray consumer and adopt the gray queues. Back: rejoin the group and take queues again."""
        if self.retired:
            log.info("consumer %s of group %s retires: the group's gray side is rolled back", self.client_id,
                     self.group)
            await self.rebalance()
            await self._heartbeat_brokers()  # leaves the group on the brokers
        else:
            log.info("consumer %s of group %s is no longer retired", self.client_id, self.group)
            await self._heartbeat_brokers()
            self._rebalance_now.set()
        self.membership.changed()

    async def _release_queues(self, keep_adopted: bool) -> None:
        """Hand back the queues held (but those held by adoption when ``keep_adopted``); in-flight ones finish."""
        await asyncio.gather(*(self._release(pq) for pq in self._pqs.values() if not (keep_adopted and pq.adopted)))

    async def _announce(self) -> None:
        self.membership.poke()
        await self._heartbeat_brokers()
        self._rebalance_now.set()

    def _on_group_changed(self, group: str) -> None:
        if group == self.group:
            self._rebalance_now.set()

    # -- brokers ---------------------------------------------------------------------------
    async def _route(self, topic: str) -> TopicRoute | None:
        try:
            return await self.routes.get(topic)
        except GrayMQError as exc:
            cached = self.routes.cached(topic)
            if cached is None:
                log.debug("no route for %s yet: %s", topic, exc.message)
            return cached

    def _broker_addresses(self) -> set[str]:
        return {b.address for topic in self.subscriptions if (r := self.routes.cached(topic)) for b in r.brokers}

    async def _heartbeat_brokers(self) -> None:
        """Register with every broker of the subscribed topics; a retired consumer leaves them instead, once."""
        if self.retired:
            await self._leave_brokers()
            return
        self._left_brokers = False
        for topic in self.subscriptions:
            await self._route(topic)
        data = pb.ConsumerData(
            group=self.group, consume_model=pb.BROADCASTING if self.broadcasting else pb.CLUSTERING,
            consume_from_where=_FROM[self.consume_from], gray_flag=self.gray, gray_switch=self.gray_switch,
            gray_weight=self.gray_weight,
            subscriptions=[pb.SubscriptionData(topic=t, sub_string=e, sub_version=int(time.time() * 1000))
                           for t, e in self.subscriptions.items()],
        )
        request = pb.HeartbeatRequest(client_id=self.client_id, consumers=[data])
        for address in self._broker_addresses():
            try:
                await self.brokers.heartbeat(address, request)
            except GrayMQError as exc:
                if not self._retry_later(exc, f"heartbeat of group {self.group} to broker {address}",
                                         ("heartbeat", address, exc.code, exc.message)):
                    return

    async def _leave_brokers(self) -> None:
        """Out of the group's view on the brokers (they tell the others, who rebalance without this client)."""
        if self._left_brokers:
            return
        self._left_brokers = True
        for address in self._broker_addresses():
            try:
                await self.brokers.unregister(address, self.client_id, self.group)
            except GrayMQError as exc:
                self._left_brokers = False  # tried again at the next heartbeat
                if not self._retry_later(exc, f"leaving group {self.group} on broker {address}",
                                         ("unregister", address, exc.code, exc.message)):
                    return

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.heartbeat_interval_s)
            await self._heartbeat_brokers()

    # -- rebalance -------------------------------------------------------------------------
    async def _rebalance_loop(self) -> None:
        backoff = Backoff(*REBALANCE_BACKOFF)
        while True:
            await wait_event(self._rebalance_now, self.settings.rebalance_interval_s)
            self._rebalance_now.clear()
            try:
                await self.rebalance()
            except GrayMQError as exc:
                if not self._retry_later(exc, f"rebalance of group {self.group}", ("rebalance", exc.code, exc.message)):
                    return
                await asyncio.sleep(backoff.next())
                self._rebalance_now.set()
                continue
            backoff.reset()

    async def _group_view(self) -> dict[str, tuple[bool, set[str] | None]]:
        """client id -> (effective gray flag, subscribed topics or None if unknown), from the brokers (this
        client's own entry is added by ``rebalance``). Not to be changed: it is kept for the next call.

        Every consumer heartbeats each broker of its topics with its flag and subscriptions; where
        brokers disagree (a heartbeat in flight) the latest heartbeat wins. The name server is not
        asked: N consumers rebalancing at once would cost it N² rows per group change. The consumers of a
        process share the view of the same listings (``group_view``): it is built once per change, not once
        per member.
        """
        listings: dict[str, pb.ConsumerListResponse] = {}

        async def from_broker(address: str) -> None:
            try:
                listings[address] = await self.brokers.consumer_list(address, self.group)
            except GrayMQError as exc:
                if exc.permanent:
                    self._fail(exc, f"listing the consumers of group {self.group} on broker {address}")
                log.debug("consumer list from %s unavailable: %s", address, exc.message)

        await asyncio.gather(*(from_broker(a) for a in self._broker_addresses()))
        self._listings, self._view = group_view(listings)
        return self._view

    def _allocate(self, view: dict[str, tuple[bool, set[str] | None]], routes: list[tuple[str, TopicRoute]]
                  ) -> dict[MessageQueue, tuple[str, bool]]:
        """queue -> (broker address, held by adoption) for the queues this client should hold; the last answer
        again when nothing it depends on changed (the group's listings, this client's flags, the routes)."""
        key = (self._listings, self.gray, self.gray_switch, self.gray_weight, self.orphan_policy, self.broadcasting,
               tuple((topic, id(route)) for topic, route in routes))
        if self._allocation is not None and self._allocation[0] == key:
            return self._allocation[2]
        wanted: dict[MessageQueue, tuple[str, bool]] = {}
        view = {**view, self.client_id: (self.gray, None)}
        for topic, route in routes:
            strategy = AllocateMessageQueueGray(
                route.is_gray, self.base_strategy, orphan_policy=self.orphan_policy, gray_switch=self.gray_switch,
                is_weighted=functools.partial(route.is_weighted, weight=self.gray_weight))
            queues = route.queues(readable=True)
            if self.broadcasting:
                mine = [mq for mq in queues if not self.gray_switch or route.is_gray(mq) == self.gray]
            else:
                clients = [ConsumerView(cid, gray) for cid, (gray, topics) in view.items()
                           if topics is None or topic in topics]
                mine = strategy.allocate(self.group, self.client_id, queues, clients)
            for mq in mine:
                address = route.address_of(mq.broker_name)
                if address is not None:
                    wanted[mq] = (address, not self.gray and strategy.adopted(mq))
        self._allocation = (key, [route for _, route in routes], wanted)
        return wanted

    async def rebalance(self) -> None:
        async with self._rebalance_lock:
            view = await self._group_view() if not self.broadcasting else {}
            if self.failure is not None:
                return
            routes: list[tuple[str, TopicRoute]] = []
            for topic in self.subscriptions if not self.retired else ():
                route = await self._route(topic)
                if route is not None:
                    routes.append((topic, route))
            wanted = self._allocate(view, routes)
            # queues change hands concurrently: each release commits the final offset, each take reads one
            held = dict(self._pqs)
            stale = [pq for mq, pq in self._pqs.items() if mq not in wanted or wanted[mq] != (pq.address, pq.adopted)]
            await asyncio.gather(*(self._release(pq) for pq in stale))
            await self._release_unused_leases(set(wanted))
            new = [(mq, address, adopted) for mq, (address, adopted) in wanted.items() if mq not in self._pqs]
            if new:
                await self._take(new)
            if self._pqs != held:  # not when a queue whose start is unknown yet stays untaken
                log.info("consumer %s (%s) now holds %s", self.client_id, "gray" if self.gray else "normal",
                         " ".join(str(mq) for mq in sorted(self._pqs)) or "nothing")
                self.membership.poke()

    async def _take(self, new: list[tuple[MessageQueue, str, bool]]) -> None:
        """Start pulling newly assigned queues (address, adopted) at their committed offset, else where
        ``StartOffsets`` says; a queue whose start is unknown yet is retried at the next rebalance.

        A clustering consumer first takes each queue's lease: a queue another client still holds (it is
        finishing what it pulled) is taken once that client releases it, at the offset it committed."""
        if not self.broadcasting:
            acquired, errors = await self.leases.acquire([(mq, address) for mq, address, _ in new])
            if any(isinstance(exc, _ROUTE_SUSPECT) for exc in errors):  # a broker gone: is there a new leader?
                for mq, _, _ in new:
                    self.routes.invalidate(mq.topic)
            for exc in errors:
                if not self._retry_later(exc, f"taking queue leases of group {self.group}",
                                         ("lease", exc.code, exc.message)):
                    return
            if len(acquired) < len(new):
                self._rebalance_soon()
            else:
                self._lease_retry.reset()
            new = [entry for entry in new if entry[0] in acquired]
        queues = [QueueToStart(mq, address, self._is_gray_queue(mq)) for mq, address, _ in new]
        starts = await self.start_offsets.plan(queues, self._broker_addresses())
        for mq, address, adopted in new:
            offset = starts[mq]
            if isinstance(offset, GrayMQError):
                what = f"reading where to start topic {mq.topic} queue {mq.queue_id} on broker {mq.broker_name}"
                if not self._retry_later(offset, what, ("start", mq, offset.code, offset.message)):
                    return
                continue
            # A queue this client gave up while its broker was down (a crash may have lost the commits it had
            # not written yet) resumes where this client stopped, when the broker's offset is behind it.
            resume = max(offset, self._unreleased.pop(mq, offset))
            pq = ProcessQueue(mq, address, resume, adopted=adopted, committed=offset)
            self._pqs[mq] = pq
            pq.task = self._tasks.spawn(f"pull {mq}", functools.partial(self._pull_loop, pq), on_restart=pq.rewind)

    def _rebalance_soon(self) -> None:
        """Rebalance again after a growing delay: a release normally wakes the group at once, this is the fallback."""
        asyncio.get_running_loop().call_later(self._lease_retry.next(), self._rebalance_now.set)

    async def _release_unused_leases(self, wanted: set[MessageQueue]) -> None:
        """Release leases of queues neither consumed nor wanted (taken while their start was unknown)."""
        for mq in [mq for mq in self.leases.held if mq not in wanted and mq not in self._pqs]:
            await self.leases.release(mq, -1)

    def _is_gray_queue(self, mq: MessageQueue) -> bool:
        route = self.routes.cached(mq.topic)
        return route is not None and self.gray_switch and route.is_gray(mq)

    async def _release(self, pq: ProcessQueue, grace_s: float | None = None) -> None:
        """Hand ``pq`` over: stop pulling it, let the batches it dispatched finish (``grace_s``, by default the
        hand-over timeout), commit exactly what was consumed and release its lease.

        Messages pulled but not yet given to the listener go back with the queue (the committed offset is
        the lowest one not consumed); a batch still running after the grace period is abandoned, and the
        next owner consumes it again.
        """
        pq.dropped = True
        self._pqs.pop(pq.mq, None)
        deadline = time.monotonic() + (self.settings.handover_timeout_s if grace_s is None else grace_s)
        running = {t for t in (pq.task,) if t is not None and not t.done()}
        if running and not pq.in_listener:
            pq.task.cancel()  # type: ignore[union-attr]
        running |= pq.consuming
        if running:
            _, late = await asyncio.wait(running, timeout=max(0.0, deadline - time.monotonic()))
            if late:
                log.warning("consumer %s hands over %s with %d batch(es) unfinished after %.1f s: the next owner "
                            "consumes them again", self.client_id, pq.mq, len(late), deadline - time.monotonic())
            if pq.task is not None and not pq.task.done():
                pq.task.cancel()
                await asyncio.gather(pq.task, return_exceptions=True)
        if self.broadcasting:
            await self._commit(pq)
        elif await self.leases.release(pq.mq, pq.commit_offset()):
            pq.committed = pq.commit_offset()
        else:
            self._unreleased[pq.mq] = pq.commit_offset()

    def _lost(self, pq: ProcessQueue, exc: GrayMQError) -> None:
        """Another client holds ``pq`` now (this one's lease ended): stop it without committing, rebalance."""
        log.info("consumer %s lost %s: %s", self.client_id, pq.mq, exc.message)
        pq.dropped = True
        mq = pq.mq
        if self._pqs.get(mq) is pq:
            del self._pqs[mq]
        self.leases.forget(mq)
        self._rebalance_now.set()

    # -- pulling and consuming -------------------------------------------------------------
    async def _pull_loop(self, pq: ProcessQueue) -> None:
        mq = pq.mq
        expression = self.subscriptions[mq.topic]
        tags = parse_sub_expression(expression)
        backoff = Backoff(*PULL_BACKOFF)
        # One request per queue, its changing fields set before each pull (the client serializes it at once).
        request = pb.PullRequest(
            consumer_group=self.group, client_id=self.client_id, topic=mq.topic, queue_id=mq.queue_id,
            max_msg_nums=self.settings.pull_batch_size, suspend_timeout_ms=int(self.settings.long_poll_s * 1000),
            adopted=pq.adopted, sub_expression=expression,
        )
        while not pq.dropped:
            await pq.space.wait()
            request.queue_offset = pq.pull_offset
            request.gray_flag = self.gray
            request.commit_offset = -1 if self.broadcasting else pq.commit_offset()
            try:
                response = await self.brokers.pull(pq.address, request)
            except GrayMQError as exc:
                if not await self._pull_failed(pq, exc):
                    return
                await asyncio.sleep(backoff.next())
                continue
            if backoff.attempts:
                log.info("pull of topic %s queue %d from broker %s works again after %d failed attempt(s)",
                         mq.topic, mq.queue_id, mq.broker_name, backoff.attempts)
                backoff.reset()
            if pq.dropped:
                return
            if response.status != pb.FOUND:
                pq.advance(response.next_begin_offset)
                continue
            messages, damaged = decode_pulled(response.records, mq.broker_name, tags, request.queue_offset,
                                              response.next_begin_offset)
            if damaged:
                self.skipped_records += len(damaged)
                log_damaged(mq, pq.address, damaged)
            pq.add([m.queue_offset for m in messages], response.next_begin_offset,
                   self.settings.max_in_flight_per_queue)
            if messages:
                await self._dispatch(pq, messages)

    async def _pull_failed(self, pq: ProcessQueue, exc: GrayMQError) -> bool:
        """Act on a failed pull before it is retried (after a backoff); False when the consumer failed instead."""
        mq = pq.mq
        if isinstance(exc, QueueLockedError):
            self._lost(pq, exc)
            return False
        if isinstance(exc, GrayIsolationError):  # this client's flag or the allocation changed meanwhile
            log.info("%s: %s; rebalancing", mq, exc.message)
            self._rebalance_now.set()
            return True
        if isinstance(exc, SubscriptionNotExistError):  # the broker lost this client's heartbeat (restarted)
            await self._heartbeat_brokers()
            return self.failure is None
        what = f"pull of topic {mq.topic} queue {mq.queue_id} from broker {mq.broker_name} ({pq.address})"
        if isinstance(exc, TopicNotExistError) and await self._topic_deleted(mq.topic):
            self._fail(TopicNotExistError(f"topic {mq.topic} was deleted (the name server has no route for it): "
                                          f"{exc.message}"), what)
            return False
        if isinstance(exc, _ROUTE_SUSPECT):
            self.routes.invalidate(mq.topic)
            self._rebalance_now.set()
        return self._retry_later(exc, what, ("pull", mq, exc.code, exc.message))

    async def _topic_deleted(self, topic: str) -> bool:
        """Whether the name server has no route for ``topic`` any more (a broker saying so may only lag behind)."""
        try:
            await self.routes.get(topic, refresh=True)
        except TopicNotExistError:
            return True
        except GrayMQError:
            return False
        return False

    async def _dispatch(self, pq: ProcessQueue, messages: list[MessageExt]) -> None:
        """Hand the messages to the listener in batches; stops at a queue being handed over (what was not
        dispatched stays uncommitted and goes with the queue)."""
        size = 1 if self.orderly else self.settings.consume_batch_size
        for i in range(0, len(messages), size):
            if pq.dropped:
                return
            batch = messages[i : i + size]
            if self.orderly:
                pq.in_listener = True
                try:
                    await self._consume(pq, batch)
                finally:
                    pq.in_listener = False
                continue
            await self._slots.acquire()
            if pq.dropped:
                self._slots.release()
                return
            task = asyncio.get_running_loop().create_task(self._consume(pq, batch))
            self._consuming.add(task)
            pq.consuming.add(task)
            task.add_done_callback(functools.partial(self._consumed, pq))

    def _consumed(self, pq: ProcessQueue, task: asyncio.Task[None]) -> None:
        self._consuming.discard(task)
        pq.consuming.discard(task)
        self._slots.release()
        self._tasks.report(task)

    async def _consume(self, pq: ProcessQueue, batch: list[MessageExt]) -> None:
        """Run the listener until the batch succeeds or is sent back; a cancelled batch, or a failed one of a
        queue handed over meanwhile, stays uncommitted.

        The listener's own exceptions are failures of the batch (see ``ListenerRunner``); anything else
        raised here is a bug, logged at ERROR, and the batch is retried like a failed one.
        """
        delay = 0.2
        while True:
            try:
                started = time.monotonic()
                accepted = await self._runner.run(batch)
                (self.health.consumed if accepted else self.health.failed)(self.gray, len(batch),
                                                                           time.monotonic() - started)
                if accepted or (
                        not self.orderly and not self.flip.gray_state.draining and await self._send_back(pq, batch)):
                    break
            except Exception as exc:
                self._tasks.unexpected(f"consume of {pq.mq}", exc, delay)
            if pq.dropped:  # handed over: the next owner consumes the batch again
                return
            await asyncio.sleep(delay)  # orderly, draining, or send-back failed: retry here
            delay = min(delay * 2, 5.0)
        self.consumed += len(batch)
        pq.done([m.queue_offset for m in batch], self.settings.max_in_flight_per_queue)

    async def _send_back(self, pq: ProcessQueue, batch: list[MessageExt]) -> bool:
        try:
            for message in batch:
                await self.brokers.send_back(pq.address, pb.SendBackRequest(
                    consumer_group=self.group, commit_log_offset=message.commit_log_offset,
                    max_reconsume_times=self.settings.max_reconsume_times, gray_flag=self.gray,
                    origin_topic=message.properties.get(PROPERTY_RETRY_TOPIC, message.topic),
                ))
            out_of_retries = sum(1 for m in batch if m.reconsume_times + 1 > self.settings.max_reconsume_times)
            self.health.sent_back(self.gray, len(batch), out_of_retries)
        except GrayMQError as exc:
            mq = pq.mq
            what = (f"send back of {len(batch)} failed message(s) of topic {mq.topic} queue {mq.queue_id} to broker "
                    f"{mq.broker_name} ({pq.address})")
            self._retry_later(exc, what, ("send back", mq, exc.code, exc.message))
            return False
        return True

    # -- offsets ---------------------------------------------------------------------------
    async def _commit(self, pq: ProcessQueue) -> None:
        offset = pq.commit_offset()
        if offset == pq.committed:
            return
        try:
            await self.offset_store.write(pq.mq, pq.address, offset)
            pq.committed = offset
        except QueueLockedError as exc:
            self._lost(pq, exc)
        except GrayMQError as exc:
            mq = pq.mq
            what = f"commit of topic {mq.topic} queue {mq.queue_id} at offset {offset} to broker {mq.broker_name}"
            self._retry_later(exc, what, ("commit", mq, exc.code, exc.message))

    async def _flush_offsets(self) -> None:
        try:
            await self.offset_store.flush()
        except GrayMQError as exc:
            self._retry_later(exc, f"writing the offsets of group {self.group}", ("flush", exc.code, exc.message))

    async def _persist_offsets(self) -> None:
        for pq in list(self._pqs.values()):
            await self._commit(pq)
        await self._flush_offsets()

    async def _persist_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.persist_interval_s)
            await self._persist_offsets()
