"""Which side (a lane or base) a stock consumer receives from: decided on the broker, from the name server.

A stock RocketMQ 5 consumer cannot say that it is gray. The broker registers it in its consumer group in the name
server — role ``consumer``, the client id the SDK sends (``x-mq-client-id``), its labels
(``credentials.client_labels``: ``host``, ``language``, ``namespace``, ``principal``) and ``protocol: rocketmq5``,
its subscribed topics — once per (client, group): when its telemetry settings name the group, or at its first
receive. The name server's answer (explicit flag, gray and lane rules, switch, orphan policy per lane, weight, a
rolled-back gray side, the desired lane) is followed as graymq's push consumer follows it, with the same
``GrayFlip``: base → a lane at once; a lane → base or another lane (a promote, a rollback, a flag) only after a
drain: it keeps receiving from its lane's queues until, on every queue of its lane's slot of its topics (and of the
group's retry topic) on this broker, the group's committed offset — which pop acks advance — is the max offset and
nothing is in flight; then it reports base. The lane maps (lane -> slot) of its topics in the answers are passed to
the broker (``lanes_heard``): the name server gives a lane a slot at its first client's heartbeat, before the
broker's own registration hears of it. Its state is reported at each step, so a promote waits for it: at once, not
at the next interval (``report_checks``), and the side its first answer gave it before its first receive.

Registrations end with the client: on ``NotifyClientTermination``, when its last telemetry stream closes, or when
it has neither stream nor receive for ``expiry_s``. One broker decides for its own queues: with several brokers each
registers the client and drains its own gray queues.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from graymq.broker_ext.grpc_endpoint.assignment import Side, receivable_queue_ids
from graymq.broker_ext.grpc_endpoint.budgets import Budgets
from graymq.broker_ext.grpc_endpoint.credentials import Caller
from graymq.broker_ext.grpc_endpoint.nameserver_session import NameServerSession
from graymq.broker_ext.grpc_endpoint.registrations import (
    PROTOCOL_LABEL,
    NameServerSessions,
    RegisteredSides,
    Registrations,
)
from graymq.broker_ext.grpc_endpoint.report_checks import ReportChecks
from graymq.broker_ext.grpc_endpoint.settings import CONSUMER_MAX_ATTEMPTS, GroupConsumption
from graymq.broker_ext.grpc_endpoint.status import RocketMQStatusError
from graymq.broker_ext.topic_config import TopicConfig
from graymq.core.consumer_side import ConsumerSide
from graymq.core.gray_flip import FlipAction, GrayFlip
from graymq.core.group_gray import GroupGray
from graymq.core.queue_layout import GRAY_LANE
from graymq.nameserver_api.membership import Membership
from graymq.nameserver_api.records import HeartbeatAnswer
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.aio import cancel_and_wait
from graymq.protocol.constants import RETRY_GROUP_TOPIC_PREFIX
from graymq.protocol.errors import GrayMQError
from graymq.protocol.membership import ClientState
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2

log = logging.getLogger(__name__)

DRAIN_TIMEOUT_S = 300.0  # as graymq's consumer: a longer drain stays gray, says why, and starts again later
DRAIN_POLL_S = 0.1  # between two reads of the gray backlog (local: offsets and in-flight counts)


@dataclass(frozen=True, slots=True)
class BrokerView:
    """What the sides read of the broker: topics, a group's per-queue backlog, the lanes of its graymq consumers, the
    messages a pop consumer holds unacked on a queue, and where a lane map heard from the name server goes."""

    topic_of: Callable[[str], TopicConfig | None]
    backlog: Callable[[str, str], list[pb.QueueBacklog]]  # (group, topic)
    graymq_lanes: Callable[[str], frozenset[str]]  # group -> the lanes of its push consumers on this broker
    in_flight: Callable[[str, str, int], int] = lambda group, topic, queue_id: 0
    lanes_heard: Callable[[str, Mapping[str, int]], None] = lambda topic, lanes: None  # (topic, lane -> slot)
    # (group, topic) -> the base queues graymq consumers of lanes other than gray hold by their lanes' weights
    lane_shares: Callable[[str, TopicConfig], frozenset[int]] = lambda group, config: frozenset()


@dataclass(slots=True)
class StockConsumer(ConsumerSide):
    """One stock consumer in one group: its flag as it follows the name server, and the group's gray settings."""

    group: str
    client_id: str
    nameserver: NameServerSession  # shared by the credential's registrations
    topics: set[str] = field(default_factory=set)
    flip: GrayFlip = field(default_factory=lambda: GrayFlip(False, drain_timeout_s=DRAIN_TIMEOUT_S,
                                                            drain_poll_s=DRAIN_POLL_S))
    group_gray: GroupGray = field(default_factory=GroupGray)
    membership: Membership | None = None
    drain: asyncio.Task[None] | None = None
    used_at: float = field(default_factory=time.monotonic)
    ready: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def state(self) -> ClientState:
        return ClientState.RETIRED if self.retired else self.flip.gray_state.state

    async def close(self) -> None:
        """Stop following the name server and leave the group there."""
        await self.ready.wait()
        if self.drain is not None:
            await cancel_and_wait(self.drain)
        if self.membership is not None:
            self.nameserver.unwatch(self.membership)
            await self.membership.stop()
            await self.membership.unregister()


def lane_backlog(broker: BrokerView, group: str, topics: Iterable[str], lane: str = GRAY_LANE) -> int:
    """Messages of ``group`` not yet acked on ``lane``'s queues of ``topics`` and of its retry topic, plus those in
    flight there (``QueueBacklog`` as the admin port answers it: a queue never committed counts from its min). The
    ``gray`` lane counts a slot the broker knows no holder of too (slot 0 before any lane map was heard)."""
    total = 0
    held_by = (lane, "") if lane == GRAY_LANE else (lane,)
    for topic in {*topics, f"{RETRY_GROUP_TOPIC_PREFIX}{group}"}:
        for q in broker.backlog(group, topic):
            if q.gray and q.lane in held_by:  # the lane's slot, not another lane's
                start = max(q.consumer_offset, q.min_offset) if q.consumer_offset >= 0 else q.min_offset
                total += max(0, q.max_offset - start) + broker.in_flight(group, topic, q.queue_id)
    return total


class ConsumerSides(RegisteredSides[StockConsumer]):
    """``await queues(caller, group, topic)``: the queue ids of ``topic`` the caller receives from right now."""

    def __init__(self, nameserver_urls: list[str], broker: BrokerView, *, broker_name: str,
                 claim: Callable[[Caller], None], interval_s: float, expiry_s: float,
                 budgets: Budgets | None = None, sessions: NameServerSessions | None = None,
                 gone: Callable[[str], None] = lambda client_id: None) -> None:
        self.nameserver_urls = nameserver_urls
        self.broker = broker
        self.broker_name = broker_name
        self.claim = claim  # binds a client id to its principal (shared with the producers' sides)
        self.interval_s = interval_s
        self._reports = ReportChecks(self._memberships)
        self.registrations: Registrations[StockConsumer] = Registrations(
            "consumer", expiry_s=expiry_s, budgets=budgets,
            # gone: the client id's owner released with the producers' side (one owner table)
            sessions=sessions or NameServerSessions(nameserver_urls, interval_s), gone=gone,
            closed=lambda key: self._reports.check(key[1]))  # a gray consumer gone moves the others' queues
        self.consumption: dict[str, GroupConsumption] = {}  # group -> as the name server's last answer said

    def _memberships(self, group: str) -> list[Membership]:
        return [c.membership for (_, g), c in self.registrations.items.items() if g == group and c.membership]

    def consumption_of(self, group: str) -> GroupConsumption:
        """How ``group``'s stock consumers consume (the defaults until the name server answered for it)."""
        return self.consumption.get(group, GroupConsumption())

    async def queues(self, caller: Caller, group: str, topic: str) -> frozenset[int] | None:
        """The ids of ``topic``'s queues on this broker ``caller`` may receive from in ``group`` (None: every one,
        as without a name server, or the topic is not here)."""
        if not self.enabled or not caller.client_id:
            return None
        consumer = await self.register(caller, group, (topic,))
        consumer.used_at = time.monotonic()
        config = self.broker.topic_of(topic)
        if config is None:
            return None
        return self._receivable(consumer, config)

    def _receivable(self, consumer: StockConsumer, config: TopicConfig) -> frozenset[int]:
        """The queues a stock consumer receives from, its lane's weight applied as graymq's consumers apply it; a base
        one also not those the group's graymq consumers of lanes other than gray hold by the weights they last told
        this broker (ahead of or behind this consumer's answer while a weight changes; docs/lanes.md)."""
        side = Side(consumer.lane, consumer.retired, self._lanes_present(consumer.group))
        ids = receivable_queue_ids(config.queue_nums, config.gray_queue_nums, side, consumer.group_gray,
                                   lane_slots=config.lane_slots, lanes=config.lanes)
        return ids if consumer.lane is not None else ids - self.broker.lane_shares(consumer.group, config)

    def _lanes_present(self, group: str) -> frozenset[str]:
        """The lanes with a consumer of ``group`` on this broker (graymq's or stock ones not retired)."""
        stock = {c.lane for c in self.registrations.items.values() if c.group == group and not c.retired}
        return self.broker.graymq_lanes(group) | {lane for lane in stock if lane is not None}

    def check(self, caller: Caller, group: str) -> None:
        """``FORBIDDEN`` when another principal holds ``caller``'s client id or its principal may not consume in
        ``group``."""
        self.claim(caller)
        if not caller.principal.rights.may_consume(group):
            raise RocketMQStatusError(v2.FORBIDDEN, f"principal {caller.principal.name} may not consume in group "
                                      f"{group}")

    async def register(self, caller: Caller, group: str, topics: Iterable[str]) -> StockConsumer:
        """The registration of ``caller`` in consumer group ``group`` (made with one heartbeat on first use); topics
        not reported yet are added and reported soon. ``FORBIDDEN`` when its principal may not consume ``group``."""
        self.check(caller, group)
        key = (caller.client_id, group)
        consumer = self.registrations.items.get(key)
        if consumer is None:
            consumer = self.registrations.add(key, caller.principal.name, caller.token, lambda session: StockConsumer(
                group, caller.client_id, session, set(topics)))
            await self._join(consumer, {**caller.labels, **PROTOCOL_LABEL})
        await consumer.ready.wait()
        if not consumer.topics.issuperset(topics):
            consumer.topics.update(topics)
            if consumer.membership is not None:
                consumer.membership.poke()
        return consumer

    async def _join(self, consumer: StockConsumer, labels: dict[str, str]) -> None:
        consumer.membership = membership = Membership(
            consumer.nameserver, group=consumer.group, client_id=consumer.client_id, role="consumer", labels=labels,
            declared_gray=None, interval_s=self.interval_s, report=functools.partial(self._report, consumer),
            on_update=functools.partial(self._apply, consumer), aligned=True, log_failures=False)
        try:
            await membership.beat()  # no answer: normal until one comes
            if membership.report_changed():  # the side the answer gave it, reported before it receives from it
                await membership.beat()
        except GrayMQError as exc:  # refused for good (rights): it receives as a normal consumer
            log.warning("stock consumer %s cannot register in group %s: %s", consumer.client_id, consumer.group,
                        exc.message)
        else:
            membership.start(watch=False)
            consumer.nameserver.watch(membership)
        finally:
            consumer.flip.follow_changes()  # the first answer was taken as is: nothing was received before it
            consumer.ready.set()

    def _report(self, consumer: StockConsumer) -> dict[str, Any]:
        queues = []
        for topic in sorted(consumer.topics):
            config = self.broker.topic_of(topic)
            if config is not None:
                queues += [f"{self.broker_name}:{topic}:{queue_id}"
                           for queue_id in sorted(self._receivable(consumer, config))]
        return {"gray": consumer.gray, "state": consumer.state.value, "topics": sorted(consumer.topics),
                "queues": queues, "lane": consumer.lane}

    async def _apply(self, consumer: StockConsumer, answer: HeartbeatAnswer) -> None:
        """A name server answer: the lane maps of its topics, the group's gray settings, then the desired lane
        (``GrayFlip`` decides); the group's reports are checked when the consumer's side, state or group settings
        changed."""
        for topic, lanes in answer.topic_lanes.items():
            self.broker.lanes_heard(topic, lanes)
        before = (consumer.lane, consumer.state, consumer.group_gray)
        consumer.group_gray = GroupGray(
            switch=answer.gray_switch, weight=answer.gray_weight, orphan_policy=answer.orphan_policy,
            retired=answer.gray_retired, lane_policies=GroupGray.policies(answer.lanes),
            lane_weights=GroupGray.lane_weights_of(answer.lanes))
        self.consumption[consumer.group] = GroupConsumption(answer.fifo, answer.max_attempts or CONSUMER_MAX_ATTEMPTS)
        self._follow(consumer, answer.desired_lane)
        if (consumer.lane, consumer.state, consumer.group_gray) != before:
            self._reports.check(consumer.group)

    def _follow(self, consumer: StockConsumer, desired: str | None) -> None:
        """Act on the desired lane: enter it at once from base, start or cancel a drain."""
        action = consumer.flip.follow(desired, draining=consumer.drain is not None)
        if action is FlipAction.BECOME_GRAY:
            consumer.flip.became_gray()
            log.info("stock consumer %s of %s: base -> lane %s (no drain needed)", consumer.client_id, consumer.group,
                     consumer.lane)
        elif action is FlipAction.CANCEL_DRAIN and consumer.drain is not None:
            consumer.drain.cancel()
            consumer.drain = None
            log.info("stock consumer %s: desired flag back to gray, drain cancelled", consumer.client_id)
        elif action is FlipAction.START_DRAIN:
            consumer.drain = asyncio.get_running_loop().create_task(
                self._drain(consumer), name=f"drain {consumer.client_id}")
            return
        if action is not FlipAction.NONE and consumer.membership is not None:
            consumer.membership.changed()

    def _step(self, consumer: StockConsumer, decide: Callable[[Any, float], FlipAction], observed: Any
              ) -> FlipAction:
        """Pass what was ``observed`` (and the time) to a decision of the flip; report at once when the state
        changed (the group's other consumers too: a drained one may end the group's gray side)."""
        before = consumer.flip.gray_state.state
        action = decide(observed, time.monotonic())
        if consumer.flip.gray_state.state is not before and consumer.membership is not None:
            consumer.membership.changed()
            self._reports.check(consumer.group)
        return action

    async def _drain(self, consumer: StockConsumer) -> None:
        """Wait for its lane's queues to be empty and settled, then report base (``GrayFlip``'s steps)."""
        flip, membership = consumer.flip, consumer.membership
        assert membership is not None
        try:
            begin = functools.partial(flip.begin_drain, gray_switch=consumer.group_gray.switch)
            action = self._step(consumer, begin, None)
            lane = flip.lane or GRAY_LANE
            log.info("stock consumer %s draining lane %s of %s", consumer.client_id, lane, consumer.group)
            while action is not FlipAction.NONE:
                if action is FlipAction.CHECK_BACKLOG:
                    backlog = lane_backlog(self.broker, consumer.group, consumer.topics, lane)
                    action = self._step(consumer, flip.backlog_read, backlog)
                elif action is FlipAction.WAIT:
                    await asyncio.sleep(flip.drain_poll_s)
                    action = FlipAction.CHECK_BACKLOG
                elif action is FlipAction.REPORT_NORMAL:
                    action = self._step(consumer, flip.report_heard, await membership.beat() is not None)
                elif action is FlipAction.HAND_OVER:
                    log.info("stock consumer %s of %s: lane %s drained, now base", consumer.client_id,
                             consumer.group, lane)
                    action = FlipAction.NONE
                else:
                    log.warning("stock consumer %s: %s; will retry while the desired flag stays normal",
                                consumer.client_id, flip.last_drain_error)
                    action = FlipAction.NONE
        except Exception:
            log.exception("drain of stock consumer %s in group %s failed; retried at the next answer",
                          consumer.client_id, consumer.group)
        finally:
            consumer.drain = None
