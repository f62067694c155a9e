"""ReceiveMessage: a stock consumer's long poll, served from the broker's pop state (``broker_ext.pop``).

As the RocketMQ proxy does, the broker receives from every readable queue of the topic on this broker that the
client may receive from now (``queue_filter``: the gray split, ``consumer_sides``) and ignores the queue the client
named. The answer streams the status, then each message (RocketMQ's system properties, an MD5 body digest: the
SDKs' CRC32 formats differ; the ``graymq.lane`` user property naming the lane of its queue), then the delivery
timestamp; nothing to deliver is ``MESSAGE_NOT_FOUND``, which the SDKs read as an empty receive.
``invisible_duration`` is required (1 s to 12 h) unless the request asks for ``auto_renew`` (a PushConsumer's, which
names none): then the endpoint's ``auto_renew_invisible_s`` is used and the broker renews the delivery while its
client stays connected (``renewals``).

The answer leaves before the call's deadline: the SDKs give a receive their request timeout plus the long polling
timeout they ask for (the Python SDK: its ``request_timeout``, 3 s by default, + ``await_duration`` or the
subscription's ``long_polling_timeout``), so the poll ends at the first of the request's ``long_polling_timeout``,
the endpoint's limit and ``DEADLINE_MARGIN_S`` before the deadline, all counted from the call's start. What comes
before the wait counts against it: a client's first receive waits for its registration's first name server answer
(``consumer_sides``: its queues), and a name server slow to answer would push the answer past the deadline
(``DEADLINE_EXCEEDED`` in the SDK). Queues not known ``DEADLINE_MARGIN_S`` before the deadline make an empty answer
(the registration goes on). A batch is bounded by ``MAX_BATCH_SIZE``; concurrent receives per client by
``MAX_STREAMS_PER_CLIENT`` (``TOO_MANY_REQUESTS``).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from collections.abc import AsyncIterator, Callable

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from graymq.broker_ext.grpc_endpoint.assignment import QueueFilter, stock_lanes
from graymq.broker_ext.grpc_endpoint.clients import ClientTable
from graymq.broker_ext.grpc_endpoint.credentials import Caller
from graymq.broker_ext.grpc_endpoint.renewals import AutoRenewals
from graymq.broker_ext.grpc_endpoint.send import PROPERTY_MESSAGE_GROUP
from graymq.broker_ext.grpc_endpoint.settings import EndpointLimits
from graymq.broker_ext.grpc_endpoint.status import OK, RocketMQStatusError, existing_topic, status
from graymq.broker_ext.pop.service import Popped, PopRequest, PopService
from graymq.broker_ext.topic_config import TopicConfig
from graymq.core.queue_layout import GRAY_LANE, slot_of_queue
from graymq.protocol import constants as c
from graymq.protocol.errors import GrayMQError
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from graymq.protocol.rocketmq_v2 import service_pb2 as v2s

MAX_BATCH_SIZE = 32  # RocketMQ's limit of one pop
MAX_STREAMS_PER_CLIENT = 16
MIN_INVISIBLE_MS, MAX_INVISIBLE_MS = 1_000, 12 * 3600_000
DEADLINE_MARGIN_S = 1.0  # the answer leaves this long before the call's deadline
# graymq's own properties, carried as RocketMQ system properties or not at all
SYSTEM_PROPERTIES = frozenset({
    c.PROPERTY_TAGS, c.PROPERTY_KEYS, c.PROPERTY_MSG_ID, c.PROPERTY_TRACE_ID, c.PROPERTY_PRODUCER_GROUP,
    c.PROPERTY_PRODUCER_SEQUENCE, c.PROPERTY_DELAY_LEVEL, c.PROPERTY_REAL_TOPIC, c.PROPERTY_REAL_QUEUE_ID,
    PROPERTY_MESSAGE_GROUP})


def _timestamp(ms: int) -> Timestamp:
    stamp = Timestamp()
    stamp.FromMilliseconds(ms)
    return stamp


def queue_lane(config: TopicConfig, queue_id: int) -> str | None:
    """The lane holding the slot of ``config``'s queue ``queue_id`` as a stock client's side reads it (None: a base
    queue, or a slot no lane holds).

    >>> config = TopicConfig("T", 10, 2, lane_slots=3, lanes={"v3": 1})  # slots: 0 is 0 5, 1 is 6 7, 2 is 8 9
    >>> [queue_lane(config, q) for q in (0, 1, 5, 6, 8)]
    ['gray', None, 'gray', 'v3', None]
    """
    slot = slot_of_queue(queue_id, config.queue_nums, config.gray_queue_nums, config.lane_slots)
    if slot is None:
        return None
    return {held: lane for lane, held in stock_lanes(config.lanes) or ((GRAY_LANE, 0),)}.get(slot)


def to_rocketmq_message(popped: Popped, store_host: str, lane: str | None = None) -> v2.Message:
    """A stored message as a stock consumer gets it, with its receipt handle. Its ``graymq.lane`` user property
    names ``lane``, the lane of the queue it came from (as it stood when the receive chose its queues), and is left
    out for a base queue (None): a stock relay copying it onto what it sends next carries the lane the message was
    delivered in, not a mark it once had."""
    msg = popped.message
    properties = msg.properties
    group = properties.get(PROPERTY_MESSAGE_GROUP)
    system = v2.SystemProperties(
        keys=msg.keys, message_id=msg.msg_id or f"{msg.topic}-{msg.queue_id}-{msg.queue_offset}",
        body_digest=v2.Digest(type=v2.MD5, checksum=hashlib.md5(msg.body).hexdigest().upper()),
        body_encoding=v2.IDENTITY, message_type=v2.FIFO if group else v2.NORMAL,
        born_timestamp=_timestamp(msg.born_timestamp), born_host=msg.born_host or "unknown",
        store_timestamp=_timestamp(msg.store_timestamp), store_host=msg.store_host or store_host,
        receipt_handle=popped.receipt_handle, queue_id=msg.queue_id, queue_offset=msg.queue_offset,
        delivery_attempt=popped.attempt)
    system.invisible_duration.FromMilliseconds(popped.invisible_ms)
    if msg.tags:
        system.tag = msg.tags
    if group:
        system.message_group = group
    user = {k: v for k, v in properties.items() if k not in SYSTEM_PROPERTIES and k != c.PROPERTY_LANE}
    if lane is not None:
        user[c.PROPERTY_LANE] = lane
    return v2.Message(topic=v2.Resource(name=msg.topic), user_properties=user, system_properties=system,
                      body=msg.body)


class ReceiveService:
    """``receive_message(request, caller, time_left_s)``: the response stream of one ReceiveMessage call; the
    deliveries it renews (``renewals``: started and stopped by the endpoint)."""

    def __init__(self, pop: PopService, topic_of: Callable[[str], TopicConfig | None], clients: ClientTable,
                 queue_filter: QueueFilter, limits: EndpointLimits, broker_name: str, renewals: AutoRenewals) -> None:
        self.pop = pop
        self._topic_of = topic_of
        self.clients = clients
        self.queue_filter = queue_filter
        self.limits = limits
        self.broker_name = broker_name
        self.renewals = renewals
        self.streams: Counter[str] = Counter()  # client id -> receives under way

    async def receive_message(self, request: v2s.ReceiveMessageRequest, caller: Caller, time_left_s: float | None
                              ) -> AsyncIterator[v2s.ReceiveMessageResponse]:
        if self.streams[caller.client_id] >= MAX_STREAMS_PER_CLIENT:
            raise RocketMQStatusError(v2.TOO_MANY_REQUESTS, f"client {caller.client_id} has "
                                      f"{MAX_STREAMS_PER_CLIENT} receives under way already")
        self.streams[caller.client_id] += 1
        try:
            pop_request = await self._pop_request(request, caller, time_left_s)
            asked = self._topic_of(pop_request.topic)  # the layout its queues were chosen by: their lanes then
            popped = await self.pop.receive(pop_request)
        except GrayMQError as error:  # not this broker's to serve now (a follower)
            raise RocketMQStatusError.from_graymq(error) from None
        finally:
            self.streams[caller.client_id] -= 1
            if not self.streams[caller.client_id]:
                del self.streams[caller.client_id]
        if not popped:
            yield v2s.ReceiveMessageResponse(status=status(v2.MESSAGE_NOT_FOUND, "no new message"))
            return
        yield v2s.ReceiveMessageResponse(status=OK)
        group, topic = request.group.name, request.message_queue.topic.name
        for item in popped:
            if request.auto_renew:
                self.renewals.track(caller.client_id, group, topic, item.receipt_handle, item.invisible_ms)
            lane = queue_lane(asked, item.message.queue_id) if asked is not None else None
            yield v2s.ReceiveMessageResponse(message=to_rocketmq_message(item, self.broker_name, lane))
        delivered = Timestamp()
        delivered.GetCurrentTime()
        yield v2s.ReceiveMessageResponse(delivery_timestamp=delivered)

    async def _pop_request(self, request: v2s.ReceiveMessageRequest, caller: Caller, time_left_s: float | None
                           ) -> PopRequest:
        """The pop of ``request``, its wait ending at the first of its long polling timeout, the endpoint's limit
        and ``DEADLINE_MARGIN_S`` before the call's deadline (``time_left_s`` from now), all counted from now."""
        now = asyncio.get_running_loop().time()
        answer_by = None if time_left_s is None else now + time_left_s - DEADLINE_MARGIN_S
        wait_s = self.limits.long_polling_timeout_s
        if request.HasField("long_polling_timeout"):
            wait_s = min(wait_s, request.long_polling_timeout.ToMilliseconds() / 1000)
        poll_end = now + wait_s if answer_by is None else min(now + wait_s, answer_by)
        group, topic = request.group.name, request.message_queue.topic.name
        config = self._readable(group, topic, caller)
        invisible_ms = self._invisible_ms(request)
        if request.batch_size < 1:
            raise RocketMQStatusError(v2.BAD_REQUEST, f"batch_size {request.batch_size} is not positive")
        allowed = await self._allowed(caller, group, topic, answer_by)
        queue_ids = tuple(q for q in range(config.queue_nums) if allowed is None or q in allowed)
        client = self.clients.clients.get(caller.client_id)
        consumption = self.clients.consumers.consumption_of(group)  # the group's, as the name server says
        return PopRequest(group, topic, queue_ids, min(request.batch_size, MAX_BATCH_SIZE), invisible_ms,
                          tags=_tags(request.filter_expression),
                          fifo=consumption.fifo or (client is not None and client.settings.subscription.fifo),
                          max_attempts=consumption.max_attempts,
                          timeout_s=max(0.0, poll_end - asyncio.get_running_loop().time()))

    def _invisible_ms(self, request: v2s.ReceiveMessageRequest) -> int:
        if request.HasField("invisible_duration"):
            return checked_invisible_ms(request.invisible_duration)
        if request.auto_renew:
            return int(self.limits.auto_renew_invisible_s * 1000)
        raise RocketMQStatusError(v2.ILLEGAL_INVISIBLE_TIME, "invisible_duration is required without auto_renew")

    async def _allowed(self, caller: Caller, group: str, topic: str, answer_by: float | None
                       ) -> frozenset[int] | None:
        """The queue filter's answer, or no queue when it has none by ``answer_by`` (the client's registration waits
        for the name server): shielded, so the registration goes on for the next receive."""
        if answer_by is None:  # a call without a deadline
            return await self.queue_filter(caller, group, topic)
        wait_s = max(0.0, answer_by - asyncio.get_running_loop().time())
        try:
            return await asyncio.wait_for(asyncio.shield(self.queue_filter(caller, group, topic)), wait_s)
        except TimeoutError:
            return frozenset()

    def _readable(self, group: str, topic: str, caller: Caller) -> TopicConfig:
        check_consume(caller, group, topic)
        config = existing_topic(self._topic_of, topic, self.broker_name)
        if not config.readable:
            raise RocketMQStatusError(v2.FORBIDDEN, f"topic {topic} is not readable on broker {self.broker_name}")
        return config


def check_consume(caller: Caller, group: str, topic: str) -> None:
    """``ILLEGAL_CONSUMER_GROUP`` without a group, ``FORBIDDEN`` unless ``caller`` may consume ``topic`` in it."""
    if not group:
        raise RocketMQStatusError(v2.ILLEGAL_CONSUMER_GROUP, "the consumer group is empty")
    if not caller.principal.rights.may_consume_topic(group, topic):
        raise RocketMQStatusError(v2.FORBIDDEN, f"principal {caller.principal.name} may not consume topic {topic} "
                                  f"in group {group}")


def checked_invisible_ms(duration: Duration) -> int:
    """``duration`` in ms, or ``ILLEGAL_INVISIBLE_TIME`` outside [1 s, 12 h]."""
    invisible_ms = duration.ToMilliseconds()
    if not MIN_INVISIBLE_MS <= invisible_ms <= MAX_INVISIBLE_MS:
        raise RocketMQStatusError(v2.ILLEGAL_INVISIBLE_TIME, f"invisible_duration {invisible_ms} ms is not within "
                                  f"[{MIN_INVISIBLE_MS}, {MAX_INVISIBLE_MS}] ms")
    return int(invisible_ms)


def _tags(expression: v2.FilterExpression) -> frozenset[str] | None:
    if expression.type not in (v2.FILTER_TYPE_UNSPECIFIED, v2.TAG):
        raise RocketMQStatusError(v2.ILLEGAL_FILTER_EXPRESSION, "only TAG filter expressions are supported")
    return c.parse_sub_expression(expression.expression)
