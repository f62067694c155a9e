"""SendMessage: a stock producer's messages stored through the broker's put-message path.

The broker picks each message's queue and ignores the client's: the lane's slot or the base set as
``producer_sides`` says for this client and the message's lane mark (the ``graymq.lane`` user property, else the
``graymq.lane`` entry of its W3C ``baggage`` property: ``core.lane_mark``), then round robin, or the hash of
``message_group`` for FIFO messages so a group's messages share one queue, in order (graymq's ``GrayQueueSelector``
on this broker's layout of the topic). A lane's first send to a topic where it holds no slot takes one from the name
server first (``ProducerSides.take_lane_slot``; a topic with no free slot refuses the send with the name server's
one line). Each message becomes a graymq send request handed to the broker's ``send`` (validation, append, sync
flush and replication waits, all as for graymq's own producers); tags, keys and user properties are kept as graymq
properties, the message group as RocketMQ's ``__SHARDINGKEY`` property, the SDK's message id as the message id.

A delayed message (``delivery_timestamp`` in the future) is put on the same side's queue, then held by the
broker's schedule service until that time (``SendProcessor.send_held``: the send's topic checks and its flush and
replication waits; ``ScheduleMessageService.schedule_at``); one already due is sent at once. Refused: an empty or
too large body, a topic this principal may not produce to, a delivery time more than ``MAX_DELAY_MS`` ahead or on
a FIFO message (``ILLEGAL_DELIVERY_TIME``, as RocketMQ), and message types not served yet — transactional, lite
and priority messages answer ``UNSUPPORTED``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from google.protobuf.timestamp_pb2 import Timestamp

from graymq.broker_ext.grpc_endpoint.assignment import stock_lanes
from graymq.broker_ext.grpc_endpoint.credentials import Caller
from graymq.broker_ext.grpc_endpoint.producer_sides import ProducerSides, Side
from graymq.broker_ext.grpc_endpoint.status import OK, RocketMQStatusError, existing_topic, status
from graymq.broker_ext.topic_config import TopicConfig
from graymq.core.lane_mark import message_lane_mark
from graymq.core.route import BrokerData, TopicRoute
from graymq.core.selector import GrayQueueSelector
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.errors import GrayMQError, LaneSlotError
from graymq.protocol.remoting import parse_body, parse_envelope
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from graymq.protocol.rocketmq_v2 import service_pb2 as v2s

PROPERTY_MESSAGE_GROUP = "__SHARDINGKEY"  # RocketMQ's name for an ordered message's sharding key

MAX_DELAY_MS = 24 * 3600_000  # RocketMQ's default maximum delay of a timed message
# Seconds of a delivery_timestamp past this (the year 5138) are milliseconds: rocketmq-python-client 5.1 documents
# its Message.delivery_timestamp in ms and copies it into the Timestamp's seconds as it is.
SECONDS_THAT_ARE_MS = 10**11

SendFn = Callable[[pb.SendRequest], "bytes | asyncio.Future[bytes]"]
DelayFn = Callable[[pb.SendRequest, int, int], "bytes | asyncio.Future[bytes]"]  # (request, due ms, now ms)


class SendService:
    """``send_message``: each message of the request stored, one result entry per message."""

    def __init__(self, broker_name: str, send: SendFn, topic_of: Callable[[str], TopicConfig | None],
                 sides: ProducerSides, max_body_size: int, delay: DelayFn | None = None) -> None:
        self.broker_name = broker_name
        self._send = send
        self._delay = delay
        self._topic_of = topic_of
        self.sides = sides
        self.max_body_size = max_body_size
        self.selector = GrayQueueSelector()

    async def send_message(self, request: v2s.SendMessageRequest, caller: Caller) -> v2s.SendMessageResponse:
        if not request.messages:
            raise RocketMQStatusError(v2.BAD_REQUEST, "no message to send")
        entries = [await self._entry(message, caller) for message in request.messages]
        codes = {entry.status.code for entry in entries}
        overall = entries[0].status if len(codes) == 1 else status(v2.MULTIPLE_RESULTS, "results differ by message")
        return v2s.SendMessageResponse(status=overall, entries=entries)

    async def _entry(self, message: v2.Message, caller: Caller) -> v2s.SendResultEntry:
        message_id = message.system_properties.message_id
        try:
            response = await self._store(message, caller)
        except RocketMQStatusError as refused:
            return v2s.SendResultEntry(status=refused.to_status(), message_id=message_id)
        except GrayMQError as error:
            return v2s.SendResultEntry(status=RocketMQStatusError.from_graymq(error).to_status(),
                                       message_id=message_id)
        return v2s.SendResultEntry(status=OK, message_id=response.msg_id, offset=response.queue_offset)

    async def _store(self, message: v2.Message, caller: Caller) -> pb.SendResponse:
        topic = message.topic.name
        config = self._check(message, caller)
        side = await self.sides.side(caller, topic, message_lane_mark(message.user_properties))
        with self.sides.sending(caller, topic, side):
            queue_id = await self._queue_id(caller, config, side, message.system_properties)
            request = pb.SendRequest(producer_group=topic, queue_id=queue_id,
                                     message=to_graymq_message(message, side.gray))
            return await self._put(request, message.system_properties)

    async def _queue_id(self, caller: Caller, config: TopicConfig, side: Side, props: v2.SystemProperties) -> int:
        """The queue a message of ``side`` goes to; a lane holding no slot of the topic takes one first."""
        group = props.message_group if props.HasField("message_group") else None
        route = own_route(self.broker_name, config)
        try:
            return self.selector.select(route, side.lane, gray_switch=side.gray_switch, sharding_key=group).queue_id
        except LaneSlotError as missing:
            await self.sides.take_lane_slot(caller, missing.topic, missing.lane)
        route = own_route(self.broker_name, existing_topic(self._topic_of, config.topic, self.broker_name))
        return self.selector.select(route, side.lane, gray_switch=side.gray_switch, sharding_key=group).queue_id

    async def _put(self, request: pb.SendRequest, props: v2.SystemProperties) -> pb.SendResponse:
        """Store ``request`` now, or hold it until its delivery time."""
        now_ms = int(time.time() * 1000)
        if props.HasField("delivery_timestamp") and (deliver_at := delivery_ms(props)) > now_ms:
            if self._delay is None:
                raise RocketMQStatusError(v2.UNSUPPORTED, "delayed messages are not served by this endpoint")
            answer = self._delay(request, deliver_at, now_ms)
        else:
            answer = self._send(request)
        payload = answer if isinstance(answer, bytes) else await answer
        return parse_body(parse_envelope(payload), response=True)  # type: ignore[return-value]

    def _check(self, message: v2.Message, caller: Caller) -> TopicConfig:
        topic = message.topic.name
        props = message.system_properties
        if props.message_type not in (v2.MESSAGE_TYPE_UNSPECIFIED, v2.NORMAL, v2.FIFO, v2.DELAY):
            kind = v2.MessageType.Name(props.message_type)
            raise RocketMQStatusError(v2.UNSUPPORTED, f"{kind} messages are not supported by graymq's gRPC endpoint "
                                      "yet (normal, FIFO and delayed are)")
        check_delivery_time(props)
        if not message.body:
            raise RocketMQStatusError(v2.MESSAGE_BODY_EMPTY, "the message body is empty")
        if len(message.body) > self.max_body_size:
            raise RocketMQStatusError(v2.MESSAGE_BODY_TOO_LARGE, f"the message body has {len(message.body)} bytes, "
                                      f"more than the {self.max_body_size} allowed")
        if PROPERTY_MESSAGE_GROUP in message.user_properties:  # would pass for its message_group to stock consumers
            raise RocketMQStatusError(v2.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property {PROPERTY_MESSAGE_GROUP!r} is "
                                      "reserved: a FIFO message's group is its system property message_group")
        if not caller.principal.rights.may_produce(topic):
            raise RocketMQStatusError(v2.FORBIDDEN, f"principal {caller.principal.name} may not produce to topic "
                                      f"{topic}")
        config = existing_topic(self._topic_of, topic, self.broker_name)
        return config


def own_route(broker_name: str, config: TopicConfig) -> TopicRoute:
    """The route of this broker's own layout of a topic, its lane slots and lane map included (as a stock client
    reads it: ``stock_lanes``), which the selector picks a stock producer's queue from."""
    broker = BrokerData(broker_name, "", config.queue_nums, config.gray_queue_nums, config.perm,
                        lane_slots=config.lane_slots)
    return TopicRoute(config.topic, (broker,), stock_lanes(config.lanes))


def to_graymq_message(message: v2.Message, gray: bool) -> pb.Message:
    """A RocketMQ 5 message as graymq stores it (born time in ms, the message group as a property)."""
    props = message.system_properties
    properties = dict(message.user_properties)
    if props.HasField("message_group"):
        properties[PROPERTY_MESSAGE_GROUP] = props.message_group
    return pb.Message(topic=message.topic.name, body=message.body, tags=props.tag if props.HasField("tag") else "",
                      keys=list(props.keys), properties=properties, msg_id=props.message_id,
                      born_timestamp=_ms(props.born_timestamp), born_host=props.born_host,
                      gray=gray)


def _ms(stamp: Timestamp) -> int:
    return stamp.seconds * 1000 + stamp.nanos // 1_000_000


def delivery_ms(props: v2.SystemProperties) -> int:
    """A message's delivery time in ms since the epoch (seconds that can only be ms read as ms)."""
    stamp = props.delivery_timestamp
    return stamp.seconds if stamp.seconds > SECONDS_THAT_ARE_MS else _ms(stamp)


def check_delivery_time(props: v2.SystemProperties) -> None:
    """Refuse a delivery time RocketMQ refuses: on a FIFO message, or more than ``MAX_DELAY_MS`` ahead (a DELAY
    message needs one)."""
    if not props.HasField("delivery_timestamp"):
        if props.message_type == v2.DELAY:
            raise RocketMQStatusError(v2.ILLEGAL_DELIVERY_TIME, "a DELAY message needs a delivery_timestamp")
        return
    if props.message_type == v2.FIFO or props.HasField("message_group"):
        raise RocketMQStatusError(v2.ILLEGAL_DELIVERY_TIME, "a FIFO message (with a message_group) cannot have a "
                                  "delivery_timestamp")
    ahead_ms = delivery_ms(props) - int(time.time() * 1000)
    if ahead_ms > MAX_DELAY_MS:
        raise RocketMQStatusError(v2.ILLEGAL_DELIVERY_TIME, f"delivery_timestamp is {ahead_ms // 1000} s ahead, "
                                  f"more than the {MAX_DELAY_MS // 1000} s allowed")
