"""SEND_MESSAGE and SEND_BATCH: validate, append to the store, wake long polls, ack (after flush when sync)."""

from __future__ import annotations

import asyncio
import functools
import secrets
import time
from typing import TYPE_CHECKING

from broker_ext.store import AppendResult, PutMessage
from protocol import graymq_pb2 as pb
from protocol.constants import PROPERTY_PRODUCER_GROUP
from protocol.errors import BadRequestError
from protocol.record import SYS_FLAG_GRAY, make_properties
from protocol.remoting import response_envelope

if TYPE_CHECKING:
    from broker_ext.broker_controller import BrokerController


def new_msg_id() -> str:
    return secrets.token_hex(16).upper()


def to_put_message(msg: pb.Message, queue_id: int, producer_group: str, reconsume_times: int = 0) -> PutMessage:
    """The store's view of a producer's message; a missing msg id is generated here."""
    if not msg.msg_id:
        msg.msg_id = new_msg_id()
    extra = dict(msg.properties) if msg.properties else {}
    if producer_group:
        extra[PROPERTY_PRODUCER_GROUP] = producer_group
    properties = make_properties(tags=msg.tags, keys=msg.keys, msg_id=msg.msg_id, trace_id=msg.trace_id,
                                 extra=extra)
    return PutMessage(
        topic=msg.topic, queue_id=queue_id, body=msg.body, properties=properties,
        sys_flag=SYS_FLAG_GRAY if msg.gray else 0, born_timestamp=msg.born_timestamp or int(time.time() * 1000),
        born_host=msg.born_host, reconsume_times=reconsume_times,
    )


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
        puts = []
        for msg in req.messages:
            if msg.topic and msg.topic != req.topic:
                raise BadRequestError(f"batch for topic {req.topic} contains a message for {msg.topic}")
            msg.topic = req.topic
            puts.append(to_put_message(msg, req.queue_id, req.producer_group))
        results = self._append(puts)
        response = pb.SendBatchResponse(
            status=pb.SEND_OK, msg_ids=[m.msg_id for m in req.messages], broker_name=self.broker.name,
            queue_id=req.queue_id, first_queue_offset=results[0].queue_offset,
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
