"""SEND_MESSAGE and SEND_BATCH: validate, append to the store, wake long polls, ack (after flush when sync)."""

from __future__ import annotations

import asyncio
import functools
import secrets
import time
from typing import TYPE_CHECKING

from graymq.broker_ext.store import AppendResult, PutMessage
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.constants import (
    KEY_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_MSG_ID,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TAGS,
    PROPERTY_TRACE_ID,
)
from graymq.protocol.errors import BadRequestError
from graymq.protocol.record import SYS_FLAG_GRAY
from graymq.protocol.remoting import response_envelope

if TYPE_CHECKING:
    from graymq.broker_ext.broker_controller import BrokerController


def new_msg_id() -> str:
    return secrets.token_hex(16).upper()


def to_put_message(msg: pb.Message, queue_id: int, producer_group: str, reconsume_times: int = 0,
                   topic: str = "") -> PutMessage:
    """The store's view of a producer's message (``topic`` overrides the message's); a missing msg id is
    generated here. Properties as ``make_properties`` orders them: the message's own, PGROUP, then the
    reserved ones — built in one dict, this runs for every message stored."""
    msg_id = msg.msg_id
    if not msg_id:
        msg_id = msg.msg_id = new_msg_id()
    properties = dict(msg.properties)
    if producer_group:
        properties[PROPERTY_PRODUCER_GROUP] = producer_group
    if tags := msg.tags:
        properties[PROPERTY_TAGS] = tags
    if keys := msg.keys:
        properties[PROPERTY_KEYS] = KEY_SEPARATOR.join(keys)
    properties[PROPERTY_MSG_ID] = msg_id
    if trace_id := msg.trace_id:
        properties[PROPERTY_TRACE_ID] = trace_id
    return PutMessage(topic or msg.topic, queue_id, msg.body, properties, SYS_FLAG_GRAY if msg.gray else 0,
                      msg.born_timestamp or int(time.time() * 1000), msg.born_host, reconsume_times)


class SendProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    def send(self, req: pb.SendRequest) -> bytes | asyncio.Future[bytes]:
        msg = req.message
        config = self.broker.topic_for_write(msg.topic)
        config.check_queue(req.queue_id)
        put = to_put_message(msg, req.queue_id, req.producer_group, req.reconsume_times)
        (result,) = self._append([put])
        response = pb.SendResponse(
            status=pb.SEND_OK, msg_id=msg.msg_id, broker_name=self.broker.name, queue_id=req.queue_id,
            queue_offset=result.queue_offset, commit_log_offset=result.physical_offset,
        )
        return self._ack(pb.SEND_MESSAGE, response, result)

    def send_batch(self, req: pb.SendBatchRequest) -> bytes | asyncio.Future[bytes]:
        if not req.messages:
            raise BadRequestError("empty batch")
        config = self.broker.topic_for_write(req.topic)
        config.check_queue(req.queue_id)
        topic, queue_id, group = req.topic, req.queue_id, req.producer_group
        puts = []
        for msg in req.messages:
            if msg.topic and msg.topic != topic:
                raise BadRequestError(f"batch for topic {topic} contains a message for {msg.topic}")
            puts.append(to_put_message(msg, queue_id, group, topic=topic))
        results = self._append(puts)
        response = pb.SendBatchResponse(
            status=pb.SEND_OK, msg_ids=[p.properties[PROPERTY_MSG_ID] for p in puts], broker_name=self.broker.name,
            queue_id=queue_id, first_queue_offset=results[0].queue_offset,
        )
        return self._ack(pb.SEND_BATCH, response, results[-1])

    def _append(self, puts: list[PutMessage]) -> list[AppendResult]:
        try:
            return self.broker.append(puts)
        except ValueError as exc:  # the store refuses a field (a separator in a property, a value out of range)
            raise BadRequestError(str(exc)) from exc

    def _ack(self, method: int, response: pb.SendResponse | pb.SendBatchResponse,
             last: AppendResult) -> bytes | asyncio.Future[bytes]:
        """The response now (async flush, or already durable), else a future answered after the flush."""
        flushed = self.broker.store.flushed_future(last.end_offset) if self.broker.settings.flush == "sync" else None
        if flushed is None:
            return response_envelope(method, response)
        answer: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        flushed.add_done_callback(functools.partial(_answer_after_flush, answer, method, response))
        return answer


def _answer_after_flush(answer: asyncio.Future[bytes], method: int,
                        response: pb.SendResponse | pb.SendBatchResponse, flushed: asyncio.Future[None]) -> None:
    if answer.done():  # the connection closed and cancelled it
        return
    if flushed.cancelled():
        answer.cancel()
    elif (exc := flushed.exception()) is not None:
        answer.set_exception(exc)
    else:
        answer.set_result(response_envelope(method, response))
