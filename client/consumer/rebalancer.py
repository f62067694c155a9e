"""The rebalancer of a push consumer: the group as the brokers list it, the allocation (AllocateMessageQueueGray),
and the queues changing hands — leases taken before a queue is pulled, and each queue handed over with its
final offset committed, so the next owner starts exactly where this one stopped.

Rebalance runs on a timer and at once when ``rebalance_now`` is set ("group changed" from a broker, a flip,
a lost queue). The name server is not asked who is in the group: N consumers rebalancing at once would cost
it N² rows per group change.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Hashable

from graymq.client.consumer.assignment import Assignment, Wanted
from graymq.client.consumer.broker_heartbeats import BrokerHeartbeats
from graymq.client.consumer.fetcher import ROUTE_SUSPECT, Fetcher
from graymq.client.consumer.group_allocation import gray_strategy, listed_as_is, members, shares_of
from graymq.client.consumer.group_view import Membership, View, group_view
from graymq.client.consumer.process_queue import ProcessQueue
from graymq.client.consumer.queue_leases import QueueLeases
from graymq.client.consumer.runtime import ConsumerRuntime
from graymq.client.consumer.start_offset import QueueToStart, StartOffsets
from graymq.client.group_listings import GroupListings
from graymq.client.message import MessageQueue
from graymq.core.allocate import AllocateMessageQueueGray, AllocateMessageQueueStrategy
from graymq.core.route import TopicRoute
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.aio import wait_event
from graymq.protocol.errors import GrayMQError
from graymq.protocol.retry import Backoff

log = logging.getLogger(__name__)

REBALANCE_BACKOFF = (0.5, 10.0)
LEASE_RETRY = (0.2, 2.0)  # seconds: first and longest wait before asking again for queues other clients hold


class Rebalancer:
    """Keeps ``assignment`` to the queues this client should hold; ``on_queues_changed`` hears when they change."""

    def __init__(self, runtime: ConsumerRuntime, assignment: Assignment, fetcher: Fetcher, *,
                 leases: QueueLeases, start_offsets: StartOffsets, heartbeats: BrokerHeartbeats,
                 base_strategy: AllocateMessageQueueStrategy, on_queues_changed: Callable[[], None],
                 listings: GroupListings | None = None) -> None:
        self.runtime = runtime
        self.assignment = assignment
        self.fetcher = fetcher
        self.leases = leases
        self.start_offsets = start_offsets
        self.heartbeats = heartbeats
        self.base_strategy = base_strategy
        self.on_queues_changed = on_queues_changed
        self.listings = listings or GroupListings(runtime.brokers)  # the instance's, shared by its consumers
        self._lock = asyncio.Lock()
        self._lease_retry = Backoff(*LEASE_RETRY)
        # The group as the brokers last listed it (its membership), and the inputs of the last allocation (the
        # routes held so their ids stay theirs) with the queues it wanted.
        self._membership: Membership = frozenset()
        self._allocation: tuple[Hashable, list[TopicRoute], Wanted] | None = None

    async def loop(self) -> None:
        rt, backoff = self.runtime, Backoff(*REBALANCE_BACKOFF)
        while True:
            asked = await wait_event(rt.rebalance_now, rt.settings.rebalance_interval_s)
            rt.rebalance_now.clear()
            try:
                await self.rebalance(periodic=not asked)
            except GrayMQError as exc:
                if not rt.retry_later(exc, f"rebalance of group {rt.group}", ("rebalance", exc.code, exc.message)):
                    return
                await asyncio.sleep(backoff.next())
                rt.rebalance_now.set()
                continue
            backoff.reset()

    async def rebalance(self, *, periodic: bool = False) -> None:
        """Take and hand over queues as the group's view and this client's side say (``periodic``: the interval's
        rebalance, which may read a group listing the process read a moment ago; any other reads afresh)."""
        rt = self.runtime
        async with self._lock:
            await self.heartbeats.meet_new_brokers()
            view = await self._group_view(periodic) if not rt.broadcasting else {}
            if rt.failure is not None:
                return
            routes: list[tuple[str, TopicRoute]] = []
            for topic in rt.subscriptions if not rt.retired else ():
                route = await self.heartbeats.route(topic)
                if route is not None:
                    routes.append((topic, route))
            wanted = self._allocate(view, routes)
            # queues change hands concurrently: each release commits the final offset, each take reads one
            held = self.assignment.snapshot()
            await asyncio.gather(*(self.hand_over(pq) for pq in self.assignment.stale(wanted)))
            await self.release_unused_leases(set(wanted))
            new = self.assignment.new(wanted)
            if new:
                await self._take(new)
            if self.assignment.queues != held:  # not when a queue whose start is unknown yet stays untaken
                log.info("consumer %s (%s) now holds %s", rt.client_id, f"lane {rt.lane}" if rt.gray else "normal",
                         " ".join(str(mq) for mq in self.assignment.assigned()) or "nothing")
                self.on_queues_changed()

    async def _group_view(self, periodic: bool) -> View:
        """client id -> (effective gray flag, subscribed topics or None if unknown), from every broker's listing
        (this client's own entry is added by ``_allocate``); the listings and the view are shared by the consumers
        of the process."""
        rt = self.runtime
        listings: dict[str, pb.ConsumerListResponse] = {}
        seen = self.listings.notices(rt.group)  # not a listing asked for before the notices that woke this one

        async def from_broker(address: str) -> None:
            try:
                listings[address] = await self.listings.fetch(address, rt.group, seen, reuse=periodic)
            except GrayMQError as exc:
                if exc.permanent:
                    rt.fail(exc, f"listing the consumers of group {rt.group} on broker {address}")
                log.debug("consumer list from %s unavailable: %s", address, exc.message)

        await asyncio.gather(*(from_broker(a) for a in rt.broker_addresses()))
        self._membership, view = group_view(rt.group, listings)
        return view

    def _allocate(self, view: View, routes: list[tuple[str, TopicRoute]]) -> Wanted:
        """queue -> (broker address, held by adoption) for the queues this client should hold; the last answer
        again when nothing it depends on changed (the group's membership, this client's flags, the routes)."""
        rt, gg = self.runtime, self.runtime.group_gray
        key = (self._membership, rt.lane, gg.switch, gg.weights, gg.orphan_policy, tuple(gg.lane_policies.items()),
               rt.broadcasting, tuple((topic, id(route)) for topic, route in routes))
        if self._allocation is not None and self._allocation[0] == key:
            return self._allocation[2]
        wanted: Wanted = {}
        for topic, route in routes:
            strategy, mine = self._mine(view, topic, route)
            for mq in mine:
                address = route.address_of(mq.broker_name)
                if address is not None:
                    wanted[mq] = (address, not rt.gray and strategy.adopted(mq))
        self._allocation = (key, [route for _, route in routes], wanted)
        return wanted

    def _mine(self, view: View, topic: str, route: TopicRoute) -> tuple[AllocateMessageQueueGray, list[MessageQueue]]:
        """(the strategy, this client's queues of ``topic``): its share of the whole group's allocation, which the
        process's consumers of the group share, unless the view does not show this client as it is: then its own
        entry is added and its share computed alone."""
        rt, gg = self.runtime, self.runtime.group_gray
        if rt.broadcasting:
            queues = route.queues(readable=True)
            return (gray_strategy(route, gg, self.base_strategy),
                    [mq for mq in queues if not gg.switch or route.lane_of(mq) == rt.lane])
        if listed_as_is(view, topic, rt.client_id, rt.lane, gg.switch):
            allocation = shares_of(rt.group, self._membership, view, topic, route, gg, self.base_strategy)
            return allocation.strategy, allocation.shares.get(rt.client_id, [])
        strategy = gray_strategy(route, gg, self.base_strategy)
        clients = members({**view, rt.client_id: (rt.lane or False, None)}, topic)
        return strategy, strategy.allocate(rt.group, rt.client_id, route.queues(readable=True), clients)

    async def _take(self, new: list[tuple[MessageQueue, str, bool]]) -> None:
        """Start pulling newly assigned queues (address, adopted) at their committed offset, else where
        ``StartOffsets`` says; a queue whose start is unknown yet is retried at the next rebalance."""
        rt = self.runtime
        if not rt.broadcasting:
            new = await self._lease(new)
            if not new:
                return
        queues = [QueueToStart(mq, address, self._is_gray_queue(mq)) for mq, address, _ in new]
        starts = await self.start_offsets.plan(queues, rt.broker_addresses())
        for mq, address, adopted in new:
            offset = starts[mq]
            if isinstance(offset, GrayMQError):
                what = f"reading where to start topic {mq.topic} queue {mq.queue_id} on broker {mq.broker_name}"
                if not rt.retry_later(offset, what, ("start", mq, offset.code, offset.message)):
                    return
                continue
            pq = ProcessQueue(mq, address, offset, adopted=adopted, committed=offset, lane=self._lane_of(mq))
            if not await self._resume(pq):
                continue
            self.assignment.add(pq)
            self.fetcher.fetch(pq)

    async def _resume(self, pq: ProcessQueue) -> bool:
        """Move ``pq`` (at its committed offset) on to where this client stopped on it unreleased (a crashed broker
        may have lost commits it had not written yet), as far as its broker holds what this client consumed: not
        past offsets where the log parted (a new leader storing other messages at offsets this client read from
        the old leader's uncopied tail: resuming past them would skip them). False when the broker could not be
        asked."""
        stop = self.assignment.unreleased.pop(pq.mq, None)
        if stop is None or stop.offset <= pq.pull_offset:
            return True
        mq, committed = pq.mq, pq.pull_offset
        try:
            pq.pull_offset = await self.fetcher.parted_at(pq, stop)
        except GrayMQError as exc:
            pq.pull_offset = committed
            self.assignment.unreleased[mq] = stop
            what = f"reading broker {mq.broker_name} ({pq.address}) from offset {committed} of {mq}"
            if self.runtime.retry_later(exc, what, ("resume", mq, exc.code, exc.message)):
                asyncio.get_running_loop().call_later(self._lease_retry.next(), self.runtime.rebalance_now.set)
            return False
        if pq.pull_offset < stop.offset:
            log.info("consumer %s resumes %s at %d, not at %d where it stopped: from there broker %s does not hold "
                     "what it consumed (committed: %d)", self.runtime.client_id, mq, pq.pull_offset, stop.offset,
                     pq.address, committed)
        return True

    async def _lease(self, new: list[tuple[MessageQueue, str, bool]]) -> list[tuple[MessageQueue, str, bool]]:
        """The queues of ``new`` whose lease this client took: a queue another client still holds (it is finishing
        what it pulled) is taken once that client releases it, at the offset it committed."""
        rt = self.runtime
        acquired, errors = await self.leases.acquire([(mq, address) for mq, address, _ in new])
        if any(isinstance(exc, ROUTE_SUSPECT) for exc in errors):  # a broker gone: is there a new leader?
            for mq, _, _ in new:
                rt.routes.invalidate(mq.topic)
        for exc in errors:
            if not rt.retry_later(exc, f"taking queue leases of group {rt.group}", ("lease", exc.code, exc.message)):
                return []
        if len(acquired) < len(new):
            # a release normally wakes the group at once; this is the fallback, after a growing delay
            asyncio.get_running_loop().call_later(self._lease_retry.next(), rt.rebalance_now.set)
        else:
            self._lease_retry.reset()
        return [entry for entry in new if entry[0] in acquired]

    async def release_unused_leases(self, wanted: set[MessageQueue]) -> None:
        """Release leases of queues neither consumed nor wanted (taken while their start was unknown)."""
        for mq in [mq for mq in self.leases.held if mq not in wanted and mq not in self.assignment]:
            await self.leases.release(mq, -1)

    def _lane_of(self, mq: MessageQueue) -> str | None:
        """The lane whose slot holds ``mq`` (None: a base queue, a free slot, or the switch off)."""
        route = self.runtime.routes.cached(mq.topic)
        return (route.lane_of(mq) or None) if route is not None and self.runtime.group_gray.switch else None

    def _is_gray_queue(self, mq: MessageQueue) -> bool:
        route = self.runtime.routes.cached(mq.topic)
        return route is not None and self.runtime.group_gray.switch and route.is_gray(mq)

    async def release_queues(self, keep_adopted: bool) -> None:
        """Hand back the queues held (but those held by adoption when ``keep_adopted``); in-flight ones finish."""
        await asyncio.gather(*(self.hand_over(pq) for pq in self.assignment if not (keep_adopted and pq.adopted)))

    async def hand_over(self, pq: ProcessQueue, grace_s: float | None = None) -> None:
        """Stop pulling ``pq``, let the batches it dispatched finish (``grace_s``, by default the hand-over
        timeout), commit exactly what was consumed and release its lease.

        Messages pulled but not yet given to the listener go back with the queue (the committed offset is
        the lowest one not consumed); a batch still running after the grace period is abandoned, and the
        next owner consumes it again.
        """
        rt = self.runtime
        self.assignment.drop(pq)
        deadline = time.monotonic() + (rt.settings.handover_timeout_s if grace_s is None else grace_s)
        running = {t for t in (pq.task,) if t is not None and not t.done()}
        if running and not pq.in_listener:
            pq.task.cancel()  # type: ignore[union-attr]
        running |= pq.consuming
        if running:
            _, late = await asyncio.wait(running, timeout=max(0.0, deadline - time.monotonic()))
            if late:
                log.warning("consumer %s hands over %s with %d batch(es) unfinished after %.1f s: the next owner "
                            "consumes them again", rt.client_id, pq.mq, len(late), deadline - time.monotonic())
            if pq.task is not None and not pq.task.done():
                pq.task.cancel()
                await asyncio.gather(pq.task, return_exceptions=True)
        if rt.broadcasting:
            await self.fetcher.commit(pq)
        elif await self.leases.release(pq.mq, pq.commit_offset()):
            pq.committed = pq.commit_offset()
        else:
            self.assignment.unreleased[pq.mq] = pq.stop()

    def lost(self, pq: ProcessQueue, exc: GrayMQError) -> None:
        """Another client holds ``pq`` now (this one's lease ended): stop it without committing, rebalance."""
        log.info("consumer %s lost %s: %s", self.runtime.client_id, pq.mq, exc.message)
        self.assignment.drop(pq)
        self.leases.forget(pq.mq)
        self.runtime.rebalance_now.set()
