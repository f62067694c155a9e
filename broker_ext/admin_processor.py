"""Offsets, topics, lookups and backlog: the broker's small request/response methods."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from graymq.broker_ext.topic_config import TopicConfig
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.errors import MessageNotFoundError, OffsetIllegalError, QueueLockedError
from graymq.protocol.remoting import response_envelope

if TYPE_CHECKING:
    from graymq.broker_ext.broker_controller import BrokerController


class AdminProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    def query_offset(self, req: pb.QueryConsumerOffsetRequest) -> bytes:
        offset = self.broker.offsets.query(req.consumer_group, req.topic, req.queue_id)
        return response_envelope(pb.QUERY_CONSUMER_OFFSET, pb.QueryConsumerOffsetResponse(offset=offset))

    def update_offset(self, req: pb.UpdateConsumerOffsetRequest) -> bytes:
        """Commit an offset within the queue's [min, max] (``OFFSET_ILLEGAL`` outside it); a consumer's commit
        (``client_id`` set) only while no other client holds the queue's lease."""
        self.broker.topics.require(req.topic).check_queue(req.queue_id)
        if req.client_id and (owner := self.broker.locks.check(req.consumer_group, req.topic, req.queue_id,
                                                               req.client_id)) is not None:
            raise QueueLockedError(f"{req.topic}#{req.queue_id} of group {req.consumer_group} is held by client "
                                   f"{owner}: client {req.client_id} may not commit it")
        low = self.broker.store.get_min_offset(req.topic, req.queue_id)
        high = self.broker.store.get_max_offset(req.topic, req.queue_id)
        if not low <= req.offset <= high:
            raise OffsetIllegalError(f"offset {req.offset} of {req.topic}#{req.queue_id} is outside the queue's "
                                     f"[{low}, {high}]")
        self.broker.offsets.commit(req.consumer_group, req.topic, req.queue_id, req.offset)
        return response_envelope(pb.UPDATE_CONSUMER_OFFSET)

    def min_offset(self, req: pb.QueueRequest) -> bytes:
        self.broker.topics.require(req.topic).check_queue(req.queue_id)
        offset = self.broker.store.get_min_offset(req.topic, req.queue_id)
        return response_envelope(pb.GET_MIN_OFFSET, pb.OffsetResponse(offset=offset))

    def max_offset(self, req: pb.QueueRequest) -> bytes:
        self.broker.topics.require(req.topic).check_queue(req.queue_id)
        offset = self.broker.store.get_max_offset(req.topic, req.queue_id)
        return response_envelope(pb.GET_MAX_OFFSET, pb.OffsetResponse(offset=offset))

    def search_offset(self, req: pb.SearchOffsetRequest) -> bytes:
        self.broker.topics.require(req.topic).check_queue(req.queue_id)
        offset = self.broker.store.get_offset_by_time(req.topic, req.queue_id, req.timestamp_ms)
        return response_envelope(pb.SEARCH_OFFSET_BY_TIME, pb.OffsetResponse(offset=offset))

    def query_by_key(self, req: pb.QueryByKeyRequest) -> bytes:
        self.broker.topics.require(req.topic)
        records = self.broker.store.query_by_key(
            req.topic, req.key, max(1, min(req.max_num or 32, 256)), req.begin_timestamp_ms,
            req.end_timestamp_ms or 2**62,
        )
        body = pb.MessagesResponse(records=b"".join(records), record_count=len(records))
        return response_envelope(pb.QUERY_MESSAGE_BY_KEY, body)

    def view_by_offset(self, req: pb.ViewByOffsetRequest) -> bytes:
        record = self.broker.store.read_record(req.commit_log_offset)
        if record is None:
            raise MessageNotFoundError(f"no message at commit log offset {req.commit_log_offset}")
        return response_envelope(pb.VIEW_MESSAGE_BY_OFFSET, pb.MessagesResponse(records=record, record_count=1))

    def update_topic(self, req: pb.UpdateTopicRequest) -> bytes:
        self.broker.topics.update(TopicConfig.from_pb(req.config))
        return response_envelope(pb.UPDATE_TOPIC)

    def get_topic(self, req: pb.GetTopicRequest) -> bytes:
        return response_envelope(pb.GET_TOPIC, self.broker.topics.require(req.topic).to_pb())

    def group_backlog(self, req: pb.GroupBacklogRequest, visible: Callable[[str], bool]) -> bytes:
        """The group's backlog on the topics ``visible`` lets the caller see."""
        queues = [q for q in self.broker.group_backlog(req.consumer_group, req.topic or None) if visible(q.topic)]
        return response_envelope(pb.GET_GROUP_BACKLOG, pb.GroupBacklogResponse(queues=queues))
