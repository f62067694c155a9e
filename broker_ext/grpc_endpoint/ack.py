"""AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue: what a stock consumer does with a
message it received, by its receipt handle.

An ack is answered once as durable as the broker's messages (``broker_ext.pop``'s journal, by ``flush``), per
entry. A handle this broker did not sign, or of another group or topic, and a stale one (acked, delivered again
since, or its invisible time over) are ``INVALID_RECEIPT_HANDLE``, as the RocketMQ proxy answers.
ChangeInvisibleDuration answers a new handle; the old one is stale from then on. A message forwarded to the
dead-letter queue goes to ``%DLQ%group`` and counts as acked. A delivery the broker renews (``renewals``: a
PushConsumer's) is named by the handle the client received and done with its current one; it is renewed no more.
"""

from __future__ import annotations

import asyncio
import logging

from graymq.broker_ext.grpc_endpoint.credentials import Caller
from graymq.broker_ext.grpc_endpoint.receive import check_consume, checked_invisible_ms
from graymq.broker_ext.grpc_endpoint.renewals import AutoRenewals
from graymq.broker_ext.grpc_endpoint.status import OK, RocketMQStatusError, status
from graymq.broker_ext.pop.receipt import InvalidReceiptHandle
from graymq.broker_ext.pop.service import PopService
from graymq.protocol.errors import GrayMQError
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from graymq.protocol.rocketmq_v2 import service_pb2 as v2s

log = logging.getLogger(__name__)


class AckService:
    """The three RPCs on one ``PopService`` (and the deliveries it renews)."""

    def __init__(self, pop: PopService, renewals: AutoRenewals) -> None:
        self.pop = pop
        self.renewals = renewals

    async def ack_message(self, request: v2s.AckMessageRequest, caller: Caller) -> v2s.AckMessageResponse:
        group, topic = request.group.name, request.topic.name
        check_consume(caller, group, topic)
        if not request.entries:
            raise RocketMQStatusError(v2.BAD_REQUEST, "no entry to ack")
        entries = await asyncio.gather(*(self._ack_entry(group, topic, entry) for entry in request.entries))
        codes = {entry.status.code for entry in entries}
        overall = entries[0].status if len(codes) == 1 else status(v2.MULTIPLE_RESULTS, "results differ by entry")
        return v2s.AckMessageResponse(status=overall, entries=entries)

    async def _ack_entry(self, group: str, topic: str, entry: v2s.AckMessageEntry) -> v2s.AckMessageResultEntry:
        """One entry's result; with ``flush`` sync the entries of a request share the journal's fsync."""
        try:
            await self.pop.ack(group, topic, self.renewals.take(group, topic, entry.receipt_handle))
            result = OK
        except InvalidReceiptHandle as refused:
            result = status(v2.INVALID_RECEIPT_HANDLE, str(refused))
        except GrayMQError as error:  # not this broker's to change now (a follower)
            result = RocketMQStatusError.from_graymq(error).to_status()
        except OSError as exc:  # the journal could not be written: not durable, so not acked for the client
            log.error("ack of %s in group %s not durable: %s", entry.message_id, group, exc)
            result = status(v2.INTERNAL_SERVER_ERROR, f"the ack could not be stored: {exc}")
        return v2s.AckMessageResultEntry(message_id=entry.message_id, receipt_handle=entry.receipt_handle,
                                         status=result)

    async def change_invisible_duration(self, request: v2s.ChangeInvisibleDurationRequest, caller: Caller
                                        ) -> v2s.ChangeInvisibleDurationResponse:
        group, topic = request.group.name, request.topic.name
        check_consume(caller, group, topic)
        invisible_ms = checked_invisible_ms(request.invisible_duration)
        handle = self.renewals.take(group, topic, request.receipt_handle)
        try:
            handle = self.pop.change_invisible(group, topic, handle, invisible_ms)
        except InvalidReceiptHandle as refused:
            raise RocketMQStatusError(v2.INVALID_RECEIPT_HANDLE, str(refused)) from None
        except GrayMQError as error:
            raise RocketMQStatusError.from_graymq(error) from None
        return v2s.ChangeInvisibleDurationResponse(status=OK, receipt_handle=handle)

    async def forward_message_to_dead_letter_queue(self, request: v2s.ForwardMessageToDeadLetterQueueRequest,
                                                   caller: Caller) -> v2s.ForwardMessageToDeadLetterQueueResponse:
        group, topic = request.group.name, request.topic.name
        check_consume(caller, group, topic)
        handle = self.renewals.take(group, topic, request.receipt_handle)
        try:
            await self.pop.forward_to_dead_letter(group, topic, handle)
        except InvalidReceiptHandle as refused:
            raise RocketMQStatusError(v2.INVALID_RECEIPT_HANDLE, str(refused)) from None
        except GrayMQError as error:
            raise RocketMQStatusError.from_graymq(error) from None
        return v2s.ForwardMessageToDeadLetterQueueResponse(status=OK)
