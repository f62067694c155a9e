"""Follows the name server's answers for a push consumer: the group's gray settings (switch, weight, orphan
policy, a rolled-back gray side) and the desired flag. For the flag it does what ``GrayFlip`` decides: releases
queues, drains in the background, reports to the name server and the brokers; the decisions and their order are
``GrayFlip``'s (see ``gray_flip``), this module only acts on them."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from graymq.client.backlog import BacklogUnavailable, gray_backlog
from graymq.client.consumer.broker_heartbeats import BrokerHeartbeats
from graymq.client.consumer.fetcher import Fetcher
from graymq.client.consumer.rebalancer import Rebalancer
from graymq.client.consumer.runtime import ConsumerRuntime
from graymq.client.lane_slots import LaneSlots, hold_slots, refresh_behind
from graymq.core.gray_flip import FlipAction, GrayFlip
from graymq.core.gray_side import Mark
from graymq.core.group_gray import GroupGray
from graymq.core.queue_layout import GRAY_LANE
from graymq.nameserver_api.membership import Membership
from graymq.nameserver_api.records import HeartbeatAnswer
from graymq.protocol.errors import DrainTimeoutError
from graymq.protocol.membership import OrphanPolicy

log = logging.getLogger(__name__)


class FlipRunner:
    """Acts on each name server answer (``on_update``) and drains on request (``drain_and_flip``); an
    ``orphan_policy`` given overrides the group's."""

    def __init__(self, runtime: ConsumerRuntime, membership: Membership, rebalancer: Rebalancer, fetcher: Fetcher,
                 heartbeats: BrokerHeartbeats, *, orphan_policy: OrphanPolicy | None, slots: LaneSlots) -> None:
        self.runtime = runtime
        self.flip: GrayFlip = runtime.flip
        self.membership = membership
        self.rebalancer = rebalancer
        self.fetcher = fetcher
        self.heartbeats = heartbeats
        self.orphan_policy = orphan_policy
        self.slots = slots  # the name server: a lane's slots are taken through it
        self._drain_task: asyncio.Task[None] | None = None
        self._drain_lock = asyncio.Lock()

    async def on_update(self, response: HeartbeatAnswer) -> None:
        """A name server answer: the group's settings (``on_settings``), then the desired flag, then a change of
        retirement the flag made."""
        await self.on_settings(response)
        was_retired = self.runtime.retired
        await self.follow(response.desired_lane)
        if self.runtime.retired != was_retired:
            await self._retirement_changed()

    async def on_settings(self, response: HeartbeatAnswer) -> None:
        """The group's part of a name server answer, which no change of this consumer makes stale: its gray settings
        first (the brokers and the allocation follow), the routes that do not name the slots the answer says this
        consumer's lane holds, then a change of retirement."""
        rt = self.runtime
        gg, was_retired = rt.group_gray, rt.retired
        rt.group_gray = update = GroupGray(
            switch=response.gray_switch, weight=response.gray_weight,
            orphan_policy=self.orphan_policy or response.orphan_policy, retired=response.gray_retired,
            lane_policies=GroupGray.policies(response.lanes), lane_weights=GroupGray.lane_weights_of(response.lanes))
        if (update.switch, update.orphan_policy, update.weights) != (gg.switch, gg.orphan_policy, gg.weights):
            await self.heartbeats.beat()  # the brokers' isolation check follows the new allocation
            rt.rebalance_now.set()
        elif update.lane_policies != gg.lane_policies:
            rt.rebalance_now.set()
        if await refresh_behind(rt.routes, response.topic_lanes, rt.lane):
            rt.rebalance_now.set()  # a slot taken by the name server's heartbeat: its queues are the lane's now
        if rt.retired != was_retired:
            await self._retirement_changed()

    async def _retirement_changed(self) -> None:
        """Retired: hand back every queue, then leave the brokers' view of the group, so the normal consumers
        see no gray consumer and adopt the gray queues. Back: rejoin the group and take queues again."""
        rt = self.runtime
        if rt.retired:
            log.info("consumer %s of group %s retires: the group's gray side is rolled back", rt.client_id, rt.group)
            try:
                await self.rebalancer.rebalance()  # hands back every queue, its final offset committed
            finally:
                await self.heartbeats.leave()  # only then: leaving drops the leases still held uncommitted
        else:
            log.info("consumer %s of group %s is no longer retired", rt.client_id, rt.group)
            await self.heartbeats.beat()
            rt.rebalance_now.set()
        self.membership.changed(after=self.membership.answer_epoch)  # it follows the answer acted on

    async def gray_backlog(self) -> int | None:
        """Unconsumed messages in the queues of this consumer's lane on every subscribed topic; None when a broker is
        unreachable."""
        rt = self.runtime
        try:
            queues = await gray_backlog(rt.brokers, rt.routes, rt.group, rt.subscriptions, lane=rt.flip.lane)
        except BacklogUnavailable as exc:
            log.info("consumer %s: %s", rt.client_id, exc.message)
            return None
        return sum(q.backlog for q in queues)

    def cancel(self) -> None:
        """Cancel a drain under way (the consumer stops)."""
        if self._drain_task is not None:
            self._drain_task.cancel()

    async def follow(self, desired: Mark) -> None:
        """Act on the desired flag (or lane) of a name server answer."""
        rt = self.runtime
        action = self.flip.follow(desired, draining=self._drain_task is not None)
        if action is FlipAction.BECOME_GRAY:
            log.info("consumer %s of %s: normal -> lane %s (no drain needed)", rt.client_id, rt.group, rt.flip.lane)
            await self.rebalancer.release_queues(keep_adopted=False)
            await hold_slots(self.slots, rt.routes, list(rt.subscriptions), rt.flip.lane or GRAY_LANE)
            self.flip.became_gray()
            self.membership.changed(after=self.membership.answer_epoch)
            await self._announce()
        elif action is FlipAction.CANCEL_DRAIN and self._drain_task is not None:
            self._drain_task.cancel()
            self._drain_task = None
            self.membership.changed(after=self.membership.answer_epoch)
            log.info("consumer %s: desired flag back to gray, drain cancelled", rt.client_id)
        elif action is FlipAction.START_DRAIN:
            self._drain_task = asyncio.get_running_loop().create_task(
                self._auto_drain(self.membership.answer_epoch), name="drain")
            rt.tasks.watch(self._drain_task)  # an unexpected error is logged; the next update starts a new one

    async def drain_and_flip(self, timeout_s: float | None = None) -> None:
        """Consume the gray queues dry, then become normal. Raises ``DrainTimeoutError`` (still gray).

        Called by the application, it also withdraws the client's own gray declaration, so the
        name server's desired flag follows unless an explicit flag or a rule says gray.
        """
        membership = self.membership
        async with self._drain_lock:
            declared = membership.declared_gray
            membership.declared_gray = False if declared else declared
            membership.changed()
            try:
                await self._drain(timeout_s)
            except DrainTimeoutError:
                membership.declared_gray = declared
                membership.changed()
                raise

    async def _auto_drain(self, after: int | None) -> None:
        """The drain an answer (come at tick ``after``) asked for: its changes follow that answer."""
        try:
            async with self._drain_lock:
                await self._drain(None, after)
        except DrainTimeoutError as exc:
            log.warning("%s; will retry while the desired flag stays normal", exc.message)
        finally:
            self._drain_task = None

    async def _drain(self, timeout_s: float | None, after: int | None = None) -> None:
        rt, flip = self.runtime, self.flip
        action = self._changed(functools.partial(flip.begin_drain, gray_switch=rt.group_gray.switch), timeout_s, after)
        if action is FlipAction.CHECK_BACKLOG:
            log.info("consumer %s draining gray queues of %s", rt.client_id, rt.group)
        while action is not FlipAction.NONE:
            if action is FlipAction.CHECK_BACKLOG:
                await self.fetcher.persist_offsets()
                backlog = await self.gray_backlog()
                action = self._changed(flip.backlog_read, backlog, after)
            elif action is FlipAction.WAIT:
                await asyncio.sleep(flip.drain_poll_s)
                action = FlipAction.CHECK_BACKLOG
            elif action is FlipAction.REPORT_NORMAL:
                heard = await self.membership.beat() is not None
                action = self._changed(flip.report_heard, heard, after)
            elif action is FlipAction.HAND_OVER:
                log.info("consumer %s of %s: gray queues drained, now normal", rt.client_id, rt.group)
                await self.rebalancer.release_queues(keep_adopted=True)
                await self._announce()
                action = FlipAction.NONE
            else:
                raise DrainTimeoutError(f"consumer {rt.client_id}: {flip.last_drain_error}")

    def _changed(self, decide: Callable[[Any, float], FlipAction], observed: Any, after: int | None) -> FlipAction:
        """Pass what was ``observed`` (and the time) to a decision of the flip; tell the name server when it
        changed the client's state (``after``: the tick of the answer the drain follows; None: the client's own)."""
        before = self.flip.gray_state.state
        action = decide(observed, time.monotonic())
        if self.flip.gray_state.state is not before:
            self.membership.changed(after)
        return action

    async def _announce(self) -> None:
        """Tell the name server and the brokers about the new flag; rebalance."""
        self.membership.poke()
        await self.heartbeats.beat()
        self.runtime.rebalance_now.set()
