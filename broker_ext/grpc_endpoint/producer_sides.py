"""Which side (a lane or base) a stock producer's sends take: decided on the broker, from the name server.

A stock RocketMQ 5 producer cannot say that it is gray, and has no producer group. As the RocketMQ proxy does, the
broker registers it as a producer of the **producer group named after each topic it publishes to** (its
``publishing.topics``, and each topic it sends to), with the client id the SDK sends (``x-mq-client-id``) and
its labels (``credentials.client_labels``: ``host``, ``language``, ``namespace``, ``principal``), using the
client's own token. The name server's answer — explicit flag, gray and lane rules, switch, whether marks are
honoured — and the message's lane mark (``core.lane_mark``) give the send's lane through ``gray_side.send_lane``,
exactly as for graymq's producer; a watch applies a flip at once, and the applied lane is reported back at once so a
promote sees it (the first answer's before the first send). While a send of a lane is under way the producer reports
that lane (``sending``). Without a name server every send is base.

Registrations end with the client: on ``NotifyClientTermination``, when its last telemetry stream closes, or
when it has neither stream nor send for ``expiry_s``. A client id belongs to the principal that used it first
until then: another principal's stream, send or termination naming it is ``FORBIDDEN`` (as on the broker port). A
principal holds at most its budget of client ids (``budgets``), and of registrations.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from graymq.broker_ext.grpc_endpoint.budgets import Budget, Budgets
from graymq.broker_ext.grpc_endpoint.credentials import Caller
from graymq.broker_ext.grpc_endpoint.nameserver_session import NameServerSession
from graymq.broker_ext.grpc_endpoint.registrations import (
    PROTOCOL_LABEL,
    NameServerSessions,
    RegisteredSides,
    Registrations,
)
from graymq.broker_ext.grpc_endpoint.status import RocketMQStatusError
from graymq.core.gray_side import send_lane
from graymq.nameserver_api.client import ConflictError
from graymq.nameserver_api.membership import Membership
from graymq.nameserver_api.records import HeartbeatAnswer
from graymq.protocol.errors import GrayMQError
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Side:
    """Where a send goes: a lane's queues (``lane``) or the base ones (None); with the switch off every queue is
    base."""

    lane: str | None
    gray_switch: bool

    @property
    def gray(self) -> bool:
        return self.lane is not None


NORMAL = Side(lane=None, gray_switch=True)


@dataclass(slots=True)
class _Registration:
    """One stock producer in one producer group (a topic): the name server's last answer, applied."""

    topic: str
    nameserver: NameServerSession  # shared by the credential's registrations
    membership: Membership | None = None
    lane: str | None = None  # the lane the name server puts it in (None: base)
    gray_switch: bool = True  # as graymq's producer: until the name server answers, the normal queues
    lane_marks: bool = False  # marks honoured, those of ``frozen_lanes`` excepted (docs/lanes.md)
    frozen_lanes: tuple[str, ...] = ()
    used_at: float = field(default_factory=time.monotonic)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    sending: dict[str, int] = field(default_factory=dict)  # lane -> its sends under way (stored or not yet answered)
    lanes_heard: Callable[[str, Mapping[str, int]], None] = lambda topic, lanes: None

    async def close(self) -> None:
        """Stop following the name server and leave the producer group there (its session is the owner's)."""
        await self.ready.wait()
        if self.membership is not None:
            self.nameserver.unwatch(self.membership)
            await self.membership.stop()
            await self.membership.unregister()

    def report(self) -> dict[str, Any]:
        """Its lane, or while a send of a lane is under way that lane: a promote reads base as "no message of the
        lane is stored after this", and a send chosen in the lane before a flip may be stored after it."""
        lane = self.lane or next(iter(self.sending), None)
        return {"gray": lane is not None, "state": "NORMAL" if lane is None else "GRAY", "topics": [self.topic],
                "queues": [], "gray_marks": self.lane_marks, "frozen_lanes": list(self.frozen_lanes), "lane": lane}

    async def apply(self, answer: HeartbeatAnswer) -> None:
        for topic, lanes in answer.topic_lanes.items():
            self.lanes_heard(topic, lanes)
        self.lane, self.lane_marks, self.frozen_lanes = answer.desired_lane, answer.lane_marks, answer.frozen_lanes
        self.gray_switch = answer.gray_switch
        # report the applied flag at once: a promote waits for it (until ready, the registration reports it)
        if self.ready.is_set() and self.membership is not None and self.membership.report_changed():
            self.membership.poke()


class ProducerSides(RegisteredSides[_Registration]):
    """``await side(caller, topic)``: where this send of ``caller`` to ``topic`` goes."""

    def __init__(self, nameserver_urls: list[str], *, interval_s: float, expiry_s: float, budgets: Budgets,
                 lanes_heard: Callable[[str, Mapping[str, int]], None] = lambda topic, lanes: None) -> None:
        self.nameserver_urls = nameserver_urls
        self.lanes_heard = lanes_heard  # (topic, lane -> slot) as the name server said: the broker keeps it
        self.interval_s = interval_s
        self.budgets = budgets
        self._owners: dict[str, str] = {}  # client id -> the principal it belongs to
        self.registrations: Registrations[_Registration] = Registrations(  # (client id, topic) ->
            "producer", expiry_s=expiry_s, gone=self._release, budgets=budgets,
            sessions=NameServerSessions(nameserver_urls, interval_s))

    def claim(self, caller: Caller) -> None:
        """Bind ``caller``'s client id to its principal; ``FORBIDDEN`` while another principal holds it,
        ``TOO_MANY_REQUESTS`` when a new one is over the principal's budget of client ids."""
        owner = self._owners.get(caller.client_id)
        if owner is None:
            self.budgets.take((Budget.CLIENT_IDS_PER_PRINCIPAL, caller.principal.name))
            owner = self._owners[caller.client_id] = caller.principal.name
        if owner != caller.principal.name:
            raise RocketMQStatusError(v2.FORBIDDEN, f"client id {caller.client_id} is in use by principal {owner}")

    def _release(self, client_id: str) -> None:
        if (owner := self._owners.pop(client_id, None)) is not None:
            self.budgets.give_back((Budget.CLIENT_IDS_PER_PRINCIPAL, owner))

    def release_unused(self, client_id: str) -> None:
        """``client_id`` left the consumers' side: its owner goes too unless it still streams or produces here."""
        if not self.registrations.has_stream(client_id) and \
                not any(key[0] == client_id for key in self.registrations.items):
            self._release(client_id)

    async def side(self, caller: Caller, topic: str, mark: str | None = None) -> Side:
        """Where a send of ``caller`` to ``topic`` goes, its message marking lane ``mark`` (``send_lane``: the mark
        while the name server lets this producer honour marks, else the producer's own lane)."""
        if not self.enabled or not caller.client_id:
            return NORMAL
        registration = await self.register(caller, topic)
        registration.used_at = time.monotonic()
        lane = send_lane(registration.lane, mark, None, marks_honoured=registration.lane_marks,
                         gray_switch=registration.gray_switch, frozen=registration.frozen_lanes)
        return Side(lane, registration.gray_switch)

    @contextlib.contextmanager
    def sending(self, caller: Caller, topic: str, side: Side) -> Iterator[None]:
        """A send of ``side`` under way: while it is, ``caller``'s registration reports the send's lane."""
        registration = self.registrations.items.get((caller.client_id, topic))
        if registration is None or side.lane is None:
            yield
            return
        registration.sending[side.lane] = registration.sending.get(side.lane, 0) + 1
        try:
            yield
        finally:
            left = registration.sending.pop(side.lane) - 1
            if left:
                registration.sending[side.lane] = left
            elif registration.membership is not None and registration.membership.report_changed():
                registration.membership.poke()

    async def take_lane_slot(self, caller: Caller, topic: str, lane: str) -> None:
        """``lane`` takes a slot of ``topic`` in the name server (as ``caller``'s registration, with its credential)
        and the broker hears of the topic's lane map; ``BAD_REQUEST`` with the name server's one line when the topic
        has no free slot."""
        registration = await self.register(caller, topic)
        try:
            taken = await registration.nameserver.nameserver.take_lane_slot(topic, lane)
        except ConflictError as full:  # not for a retry to change: an operator grows the topic or ends a lane
            raise RocketMQStatusError(v2.BAD_REQUEST, full.message) from None
        self.lanes_heard(topic, taken.lanes)

    async def register(self, caller: Caller, topic: str) -> _Registration:
        """The registration of ``caller`` in producer group ``topic``, made (one heartbeat) on first use."""
        self.claim(caller)
        key = (caller.client_id, topic)
        registration = self.registrations.items.get(key)
        if registration is None:
            registration = self.registrations.add(key, caller.principal.name, caller.token,
                                                  lambda session: _Registration(topic, session,
                                                                                lanes_heard=self.lanes_heard))
            registration.membership = Membership(
                registration.nameserver, group=topic, client_id=caller.client_id, role="producer",
                labels={**caller.labels, **PROTOCOL_LABEL}, declared_gray=None, interval_s=self.interval_s,
                report=registration.report, on_update=registration.apply, aligned=True, log_failures=False)
            try:
                await registration.membership.beat()  # no answer: normal until one comes
                if registration.membership.report_changed():  # the flag applied, reported before the first send
                    await registration.membership.beat()
            except GrayMQError as exc:  # refused for good (rights): its sends stay normal
                log.warning("stock producer %s cannot register in producer group %s: %s", caller.client_id, topic,
                            exc.message)
            else:
                registration.membership.start(watch=False)
                registration.nameserver.watch(registration.membership)
            finally:
                registration.ready.set()
        await registration.ready.wait()
        return registration

    def stream_opened(self, caller: Caller) -> None:
        self.claim(caller)
        self.registrations.stream_opened(caller.client_id)

    async def stream_closed(self, client_id: str) -> None:
        await self.registrations.stream_closed(client_id)

    async def forget(self, client_id: str) -> None:
        """Stop and unregister every registration of ``client_id`` (it terminated or went away)."""
        await self.registrations.forget(client_id)
