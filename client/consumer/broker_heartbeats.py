"""A push consumer's place in its group on the brokers: heartbeats carrying its flag and subscriptions to every
broker of its topics (the brokers list the group from them), and leaving the group (retired, or stopping).

The heartbeats go through its client instance's ``BrokerBeats`` (client/broker_beats.py): one request per broker for
the instance's consumers due together; they beat on one grid of the interval, so those of one instance are due
together."""

from __future__ import annotations

import asyncio
import enum
import logging
import time

from graymq.client.broker_beats import BrokerBeats
from graymq.client.consumer.runtime import ConsumerRuntime
from graymq.core.route import TopicRoute
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.errors import GrayMQError

log = logging.getLogger(__name__)

CONSUME_FROM = {"last": pb.CONSUME_FROM_LAST_OFFSET, "first": pb.CONSUME_FROM_FIRST_OFFSET,
                "timestamp": pb.CONSUME_FROM_TIMESTAMP}


class Standing(enum.Enum):
    """A consumer's place in its group on the brokers."""

    MEMBER = "member"  # it heartbeats, listed in the group
    LEAVING = "leaving"  # retired and its queues handed back: it unregisters rather than beats
    LEFT = "left"  # retired and unregistered from every broker


class BrokerHeartbeats:
    """Heartbeats the brokers every ``heartbeat_interval_s`` (``loop``) and on demand (``beat``)."""

    def __init__(self, runtime: ConsumerRuntime, consume_from: str, beats: BrokerBeats | None = None) -> None:
        self.runtime = runtime
        self.beats = beats or BrokerBeats(runtime.brokers, runtime.client_id)  # without an instance's: its own
        self.consume_from = CONSUME_FROM[consume_from]
        self.standing = Standing.MEMBER
        self._data: pb.ConsumerData | None = None
        self._data_key: tuple[object, ...] = ()
        self._versions: dict[str, tuple[str, int]] = {}  # topic -> (expression, when it was set, ms)
        self._met: set[str] = set()  # brokers this consumer sent a heartbeat to (answered or not)

    async def route(self, topic: str) -> TopicRoute | None:
        """The topic's route, the cached one when the name server does not answer (None: none known yet)."""
        routes = self.runtime.routes
        try:
            return await routes.get(topic)
        except GrayMQError as exc:
            cached = routes.cached(topic)
            if cached is None:
                log.debug("no route for %s yet: %s", topic, exc.message)
            return cached

    async def beat(self) -> None:
        """Register with every broker of the subscribed topics; a retired consumer that handed back its queues
        (``leave``) leaves them instead, once. Until then it stays in the group, its leases renewed: leaving drops
        them uncommitted, and the next owners would consume again what it finished meanwhile."""
        rt = self.runtime
        if rt.retired and self.standing is not Standing.MEMBER:
            await self._leave()
            return
        if not rt.retired:
            self.standing = Standing.MEMBER
        for topic in rt.subscriptions:
            await self.route(topic)
        data = self.data()
        for address in rt.broker_addresses():
            self._met.add(address)
            try:
                await self.beats.heartbeat(address, data)
            except GrayMQError as exc:
                if not rt.retry_later(exc, f"heartbeat of group {rt.group} to broker {address}",
                                      ("heartbeat", address, exc.code, exc.message)):
                    return

    async def meet_new_brokers(self) -> None:
        """Heartbeat now when a broker of the subscribed topics was never sent one of this consumer's (a topic's new
        leader after a failover, a topic spread to another broker): its listing of the group would miss this
        consumer until the next interval, and the group's rebalances with it. A broker that did not answer is left
        to the interval: a rebalance does not wait for an unreachable broker each time."""
        rt = self.runtime
        if self.standing is Standing.MEMBER and not rt.retired and not self._met.issuperset(rt.broker_addresses()):
            await self.beat()

    def data(self) -> pb.ConsumerData:
        """This consumer's heartbeat data, built again only when a part of it changed (an idle consumer beats the same
        data every interval). A subscription's version is the time its expression last changed: when clients of one
        side subscribe to a topic with different expressions, the broker keeps the newest subscription, as RocketMQ
        does, rather than the one of the client that beat last."""
        rt, gg = self.runtime, self.runtime.group_gray
        key = (rt.gray, rt.wire_lane, gg.switch, gg.weight, tuple(sorted(gg.lane_weights.items())),
               tuple(rt.subscriptions.items()), rt.broadcasting)
        if self._data is None or key != self._data_key:
            now, versions = int(time.time() * 1000), {}
            for topic, expression in rt.subscriptions.items():
                known = self._versions.get(topic)
                versions[topic] = known if known is not None and known[0] == expression else (expression, now)
            self._versions = versions
            self._data_key, self._data = key, pb.ConsumerData(
                client_id=rt.client_id, group=rt.group,
                consume_model=pb.BROADCASTING if rt.broadcasting else pb.CLUSTERING,
                consume_from_where=self.consume_from, gray_flag=rt.gray, gray_switch=gg.switch,
                gray_weight=gg.weight, lane=rt.wire_lane, lane_weights=gg.lane_weights,
                subscriptions=[pb.SubscriptionData(topic=topic, sub_string=expression, sub_version=version)
                               for topic, (expression, version) in self._versions.items()])
        return self._data

    async def leave(self) -> None:
        """A retired consumer whose queues were handed back leaves the group on the brokers (and so at every
        later heartbeat while it stays retired)."""
        if self.standing is Standing.MEMBER:
            self.standing = Standing.LEAVING
        await self.beat()

    async def _leave(self) -> None:
        """Out of the group's view on the brokers (they tell the others, who rebalance without this client)."""
        if self.standing is Standing.LEFT:
            return
        self.standing = Standing.LEFT
        rt = self.runtime
        for address in rt.broker_addresses():
            try:
                await self.beats.unregister(address, rt.client_id, rt.group)
            except GrayMQError as exc:
                self.standing = Standing.LEAVING  # tried again at the next heartbeat
                if not rt.retry_later(exc, f"leaving group {rt.group} on broker {address}",
                                      ("unregister", address, exc.code, exc.message)):
                    return

    async def unregister(self) -> None:
        """Leave the group on every broker as the consumer stops (a failure is only logged)."""
        rt = self.runtime
        for address in rt.broker_addresses():
            try:
                await self.beats.unregister(address, rt.client_id, rt.group)
            except GrayMQError as exc:
                log.info("unregister from %s failed: %s", address, exc.message)

    async def loop(self) -> None:
        """Heartbeat on the interval's grid of the monotonic clock (the instance's consumers beat together); the
        interval is shorter than configured where a broker's client expiry or queue lease asks."""
        while True:
            interval_s = self.beats.interval_s(self.runtime.settings.heartbeat_interval_s)
            await asyncio.sleep(interval_s - time.monotonic() % interval_s)
            await self.beat()
