"""SEND_MESSAGE and SEND_BATCH: validate, append to the store, wake long polls, ack (after the flush when it is
sync, and after the in-sync followers stored it when replication is sync).

A request with a producer id is idempotent (producer_table.py): a retry of one already stored is answered
with the first result (``duplicate`` set) and stores nothing; the first record of each request stored carries
the producer id and sequence, so the table can be rebuilt after a restart.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import secrets
import time
from collections.abc import Callable, Sequence

from graymq.broker_ext.processors.producer_table import FORGOTTEN, ProducerTable, Stored, sequence_property
from graymq.broker_ext.processors.put_message_service import PutMessageService
from graymq.broker_ext.replication.feed import ReplicaFeed
from graymq.broker_ext.replication.role import ReplicaRole
from graymq.broker_ext.store import AppendResult, MessageStore, PutMessage
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.constants import (
    KEY_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_MSG_ID,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_PRODUCER_SEQUENCE,
    PROPERTY_TAGS,
    PROPERTY_TRACE_ID,
)
from graymq.protocol.errors import BadRequestError, NotLeaderError, RequestTimeoutError
from graymq.protocol.native import SPEEDUPS
from graymq.protocol.properties import PropertyLimits, own_properties
from graymq.protocol.record import SYS_FLAG_GRAY
from graymq.protocol.remoting import response_envelope

log = logging.getLogger(__name__)


def new_msg_id() -> str:
    return secrets.token_hex(16).upper()


DEFAULT_LIMITS = PropertyLimits()


def put_properties(msg: pb.Message, producer_group: str, new_id: Callable[[], str] = new_msg_id,
                   limits: PropertyLimits = DEFAULT_LIMITS) -> dict[str, str]:
    """The properties a producer's message is stored with, as ``make_properties`` orders them: the message's own
    (within ``limits``, the reserved names the broker sets stripped: protocol/properties.py), PGROUP, then the
    reserved ones, built in one dict; a missing msg id is generated (``new_id``) and set on ``msg``."""
    properties = own_properties(msg.properties, msg.tags, msg.keys, limits)
    msg_id = msg.msg_id
    if not msg_id:
        msg_id = msg.msg_id = new_id()
    if producer_group:
        properties[PROPERTY_PRODUCER_GROUP] = producer_group
    if tags := msg.tags:
        properties[PROPERTY_TAGS] = tags
    if keys := msg.keys:
        properties[PROPERTY_KEYS] = KEY_SEPARATOR.join(keys)
    properties[PROPERTY_MSG_ID] = msg_id
    if trace_id := msg.trace_id:
        properties[PROPERTY_TRACE_ID] = trace_id
    return properties


def to_put_message(msg: pb.Message, queue_id: int, producer_group: str, reconsume_times: int = 0,
                   topic: str = "", limits: PropertyLimits = DEFAULT_LIMITS) -> PutMessage:
    """The store's view of a producer's message (``topic`` overrides the message's)."""
    return PutMessage(topic or msg.topic, queue_id, msg.body, put_properties(msg, producer_group, limits=limits),
                      SYS_FLAG_GRAY if msg.gray else 0, msg.born_timestamp or int(time.time() * 1000), msg.born_host,
                      reconsume_times)


def to_puts_py(messages: Sequence[pb.Message], topic: str, queue_id: int, producer_group: str,
               put_class: type[PutMessage], new_id: Callable[[], str], limits: PropertyLimits) -> list[PutMessage]:
    """A batch's messages as ``put_class`` puts to ``topic`` (one naming another topic, or with properties out of
    ``limits``, is refused); the reference of the compiled ``wire_puts``, which reads them from the request's wire
    bytes instead."""
    puts = []
    for msg in messages:
        if msg.topic and msg.topic != topic:
            raise BadRequestError(f"batch for topic {topic} contains a message for {msg.topic}")
        puts.append(put_class(topic, queue_id, msg.body, put_properties(msg, producer_group, new_id, limits),
                              SYS_FLAG_GRAY if msg.gray else 0, msg.born_timestamp or int(time.time() * 1000),
                              msg.born_host, 0))
    return puts


def batch_puts_py(req: pb.SendBatchRequest, raw: bytes, limits: PropertyLimits) -> list[PutMessage]:
    """The puts of a SEND_BATCH (``raw``: its body as received, read by the compiled twin)."""
    return to_puts_py(req.messages, req.topic, req.queue_id, req.producer_group, PutMessage, new_msg_id, limits)


def batch_puts_wire(req: pb.SendBatchRequest, raw: bytes, limits: PropertyLimits) -> list[PutMessage]:
    """The same puts from the compiled ``wire_puts``, which reads the messages from ``raw`` itself."""
    assert SPEEDUPS is not None
    return SPEEDUPS.wire_puts(raw, req.topic, req.queue_id, req.producer_group, PutMessage,  # type: ignore[no-any-return]
                              new_msg_id, limits)


batch_puts = batch_puts_py if SPEEDUPS is None else batch_puts_wire


class SendProcessor:
    """``sync_flush``: a send is answered once flushed; on a sync-replicated leader (``role``), once the in-sync
    followers stored it too (``feed``). A message's properties out of ``limits`` refuse its request."""

    def __init__(self, broker_name: str, put_service: PutMessageService, producers: ProducerTable,
                 store: MessageStore, role: ReplicaRole, feed: ReplicaFeed, *, sync_flush: bool,
                 limits: PropertyLimits = DEFAULT_LIMITS) -> None:
        self.broker_name = broker_name
        self.put_service = put_service
        self.producers = producers
        self.store = store
        self.role = role
        self.feed = feed
        self.sync_flush = sync_flush
        self.limits = limits

    def send(self, req: pb.SendRequest) -> bytes | asyncio.Future[bytes]:
        msg = req.message
        config = self.put_service.topic_for_write(msg.topic)
        config.check_queue(req.queue_id)
        producer_id = req.producer_id
        if producer_id:
            known = self._known(producer_id, msg.topic, req.queue_id, req.sequence, [msg])
            if known is not None:
                response = pb.SendResponse(
                    status=pb.SEND_OK, msg_id=known.msg_id or msg.msg_id, broker_name=self.broker_name,
                    queue_id=req.queue_id, queue_offset=known.queue_offset,
                    commit_log_offset=known.commit_log_offset, duplicate=True,
                )
                return self._ack(pb.SEND_MESSAGE, response, self._end_of(known))
        put = to_put_message(msg, req.queue_id, req.producer_group, req.reconsume_times, limits=self.limits)
        if producer_id:
            put.properties[PROPERTY_PRODUCER_SEQUENCE] = sequence_property(producer_id, req.sequence, 1)
        (result,) = self._append([put])
        if producer_id:
            self.producers.record(producer_id, msg.topic, req.queue_id, Stored(
                req.sequence, result.queue_offset, result.physical_offset, result.end_offset, 1, msg.msg_id))
        response = pb.SendResponse(
            status=pb.SEND_OK, msg_id=msg.msg_id, broker_name=self.broker_name, queue_id=req.queue_id,
            queue_offset=result.queue_offset, commit_log_offset=result.physical_offset,
        )
        return self._ack(pb.SEND_MESSAGE, response, result.end_offset)

    def send_held(self, req: pb.SendRequest, hold: Callable[[PutMessage], AppendResult]
                  ) -> bytes | asyncio.Future[bytes]:
        """SEND_MESSAGE for a message ``hold`` stores elsewhere until its time (the schedule topic), answered as a
        send is: its offsets there, after the sync flush and replication waits."""
        msg = req.message
        self.put_service.topic_for_write(msg.topic).check_queue(req.queue_id)
        put = to_put_message(msg, req.queue_id, req.producer_group, req.reconsume_times, limits=self.limits)
        try:
            result = hold(put)
        except ValueError as exc:  # the store refuses a field, as in _append
            raise BadRequestError(str(exc)) from exc
        response = pb.SendResponse(
            status=pb.SEND_OK, msg_id=msg.msg_id, broker_name=self.broker_name, queue_id=req.queue_id,
            queue_offset=result.queue_offset, commit_log_offset=result.physical_offset,
        )
        return self._ack(pb.SEND_MESSAGE, response, result.end_offset)

    def send_batch(self, req: pb.SendBatchRequest, raw: bytes) -> bytes | asyncio.Future[bytes]:
        """``raw``: the request's body as received (``req`` parsed from it)."""
        if not req.messages:
            raise BadRequestError("empty batch")
        config = self.put_service.topic_for_write(req.topic)
        config.check_queue(req.queue_id)
        topic, queue_id = req.topic, req.queue_id
        producer_id = req.producer_id
        if producer_id:
            known = self._known(producer_id, topic, queue_id, req.sequence, req.messages)
            if known is not None:
                response = pb.SendBatchResponse(
                    status=pb.SEND_OK, msg_ids=[m.msg_id for m in req.messages], broker_name=self.broker_name,
                    queue_id=queue_id, first_queue_offset=known.queue_offset, duplicate=True,
                )
                return self._ack(pb.SEND_BATCH, response, self._end_of(known))
        puts = batch_puts(req, raw, self.limits)
        if producer_id:
            puts[0].properties[PROPERTY_PRODUCER_SEQUENCE] = sequence_property(producer_id, req.sequence, len(puts))
        results = self._append(puts)
        first = results[0]
        if producer_id:
            self.producers.record(producer_id, topic, queue_id, Stored(
                req.sequence, first.queue_offset, first.physical_offset, results[-1].end_offset, len(puts),
                puts[0].properties[PROPERTY_MSG_ID]))
        response = pb.SendBatchResponse(
            status=pb.SEND_OK, msg_ids=[p.properties[PROPERTY_MSG_ID] for p in puts], broker_name=self.broker_name,
            queue_id=queue_id, first_queue_offset=first.queue_offset,
        )
        return self._ack(pb.SEND_BATCH, response, results[-1].end_offset)

    def _known(self, producer_id: int, topic: str, queue_id: int, sequence: int,
               messages: Sequence[pb.Message]) -> Stored | None:
        """Where this request was stored before (``FORGOTTEN``: stored, no longer known where); ``None``: never.
        A sequence stored for a different request (another first msg id or message count) is refused."""
        if sequence < 0:
            raise BadRequestError(f"sequence {sequence} of producer {producer_id:x} is negative")
        known = self.producers.lookup(producer_id, topic, queue_id, sequence)
        if known is None:
            return None
        if known is FORGOTTEN:
            log.info("sequence %d of producer %x on %s/%d is older than the %d kept: answered as a duplicate",
                     sequence, producer_id, topic, queue_id, self.producers.kept)
            return known
        first_id = messages[0].msg_id if messages else ""
        if known.messages != len(messages) or (first_id and known.msg_id and first_id != known.msg_id):
            raise BadRequestError(
                f"sequence {sequence} of producer {producer_id:x} on {topic}/{queue_id} was used by another request "
                f"({known.messages} messages from {known.msg_id}, now {len(messages)} from {first_id})")
        log.info("retry of sequence %d of producer %x on %s/%d answered with its first result (queue offset %d)",
                 sequence, producer_id, topic, queue_id, known.queue_offset)
        return known

    def _end_of(self, known: Stored) -> int:
        """What the answer to a duplicate waits to be flushed: its request's end, or the log's when forgotten."""
        return self.store.max_physical_offset if known is FORGOTTEN else known.end_offset

    def _append(self, puts: list[PutMessage]) -> list[AppendResult]:
        try:
            return self.put_service.append(puts, one_queue=True)  # a send's, a SEND_BATCH's: one queue
        except ValueError as exc:  # the store refuses a field (a separator in a property, a value out of range)
            raise BadRequestError(str(exc)) from exc

    def _ack(self, method: int, response: pb.SendResponse | pb.SendBatchResponse,
             end_offset: int) -> bytes | asyncio.Future[bytes]:
        """The response now (async flush, or already durable to ``end_offset``), else a future answered after
        the flush."""
        flushed = self.store.flushed_future(end_offset) if self.sync_flush else None
        replicated = self.feed.acked(end_offset) if self.role.sync else None
        if flushed is None and replicated is None:  # the usual case (async flush): answered now
            return response_envelope(method, response)
        waits = [f for f in (flushed, replicated) if f is not None]
        answer: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        done = functools.partial(_answer_after, answer, method, response, waits, self.role)
        for future in waits:
            future.add_done_callback(done)
        return answer


def _answer_after(answer: asyncio.Future[bytes], method: int, response: pb.SendResponse | pb.SendBatchResponse,
                  waits: list[asyncio.Future[None]], role: ReplicaRole, finished: asyncio.Future[None]) -> None:
    """Answer once every wait (the sync flush, the sync replication) is over: the first failure fails it, and so
    does a leader lease that ran out meanwhile (``ReplicaRole.fence``) — as an outcome unknown (``TIMEOUT``), since
    the request was written: the producer repeats it under the same sequence."""
    if answer.done():  # the connection closed and cancelled it, or an earlier wait failed
        return
    if finished.cancelled():
        answer.cancel()
    elif (exc := finished.exception()) is not None:
        answer.set_exception(exc)
    elif all(f.done() for f in waits):
        try:
            role.fence()
        except NotLeaderError as fenced:
            # written already: NOT_LEADER says "nothing stored" and the producer would send it again under a new
            # sequence, a second copy once this replica renews its lease or a follower that copied it leads
            answer.set_exception(RequestTimeoutError(
                f"{fenced.message}; the request was stored here first, its outcome is unknown: a retry of it "
                "(same queue and sequence) is stored once"))
            return
        answer.set_result(response_envelope(method, response))
