"""Offsets, topics, lookups and backlog: the broker's small request/response methods."""

from __future__ import annotations

from collections.abc import Callable

from graymq.broker_ext.groups.consumer_manager import ConsumerManager
from graymq.broker_ext.groups.offset_manager import ConsumerOffsetManager
from graymq.broker_ext.groups.queue_leases import QueueLocks
from graymq.broker_ext.processors.send_back import ScheduleMessageService
from graymq.broker_ext.store import MessageStore
from graymq.broker_ext.topic_config import TopicConfig, TopicConfigManager
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.errors import MessageNotFoundError, OffsetIllegalError, QueueLockedError
from graymq.protocol.remoting import response_envelope


class AdminProcessor:
    def __init__(self, topics: TopicConfigManager, offsets: ConsumerOffsetManager, locks: QueueLocks,
                 store: MessageStore, consumers: ConsumerManager, schedule: ScheduleMessageService,
                 listed_end: Callable[[], int | None] = lambda: None) -> None:
        self.topics = topics
        self.listed_end = listed_end  # GET_MAX_OFFSET counts messages stored before it (a sync leader's confirmed)
        self.offsets = offsets
        self.locks = locks
        self.store = store
        self.consumers = consumers
        self.schedule = schedule

    def query_offset(self, req: pb.QueryConsumerOffsetRequest) -> bytes:
        offset = self.offsets.query(req.consumer_group, req.topic, req.queue_id)
        return response_envelope(pb.QUERY_CONSUMER_OFFSET, pb.QueryConsumerOffsetResponse(offset=offset))

    def update_offset(self, req: pb.UpdateConsumerOffsetRequest) -> bytes:
        """Commit an offset within the queue's [min, max] (``OFFSET_ILLEGAL`` outside it); a consumer's commit
        (``client_id`` set) only while no other client holds the queue's lease."""
        self.topics.require(req.topic).check_queue(req.queue_id)
        if req.client_id and (owner := self.locks.check(req.consumer_group, req.topic, req.queue_id,
                                                        req.client_id)) is not None:
            raise QueueLockedError(f"{req.topic}#{req.queue_id} of group {req.consumer_group} is held by client "
                                   f"{owner}: client {req.client_id} may not commit it")
        low = self.store.get_min_offset(req.topic, req.queue_id)
        high = self.store.get_max_offset(req.topic, req.queue_id)
        if not low <= req.offset <= high:
            raise OffsetIllegalError(f"offset {req.offset} of {req.topic}#{req.queue_id} is outside the queue's "
                                     f"[{low}, {high}]")
        self.offsets.commit(req.consumer_group, req.topic, req.queue_id, req.offset)
        return response_envelope(pb.UPDATE_CONSUMER_OFFSET)

    def min_offset(self, req: pb.QueueRequest) -> bytes:
        self.topics.require(req.topic).check_queue(req.queue_id)
        offset = self.store.get_min_offset(req.topic, req.queue_id)
        return response_envelope(pb.GET_MIN_OFFSET, pb.OffsetResponse(offset=offset))

    def max_offset(self, req: pb.QueueRequest) -> bytes:
        self.topics.require(req.topic).check_queue(req.queue_id)
        offset = self.store.get_max_offset_below(req.topic, req.queue_id, self.listed_end())
        return response_envelope(pb.GET_MAX_OFFSET, pb.OffsetResponse(offset=offset))

    def search_offset(self, req: pb.SearchOffsetRequest) -> bytes:
        self.topics.require(req.topic).check_queue(req.queue_id)
        offset = self.store.get_offset_by_time(req.topic, req.queue_id, req.timestamp_ms)
        return response_envelope(pb.SEARCH_OFFSET_BY_TIME, pb.OffsetResponse(offset=offset))

    def query_by_key(self, req: pb.QueryByKeyRequest) -> bytes:
        self.topics.require(req.topic)
        records = self.store.query_by_key(
            req.topic, req.key, max(1, min(req.max_num or 32, 256)), req.begin_timestamp_ms,
            req.end_timestamp_ms or 2**62,
        )
        body = pb.MessagesResponse(records=b"".join(records), record_count=len(records))
        return response_envelope(pb.QUERY_MESSAGE_BY_KEY, body)

    def view_by_offset(self, req: pb.ViewByOffsetRequest) -> bytes:
        record = self.store.read_record(req.commit_log_offset)
        if record is None:
            raise MessageNotFoundError(f"no message at commit log offset {req.commit_log_offset}")
        return response_envelope(pb.VIEW_MESSAGE_BY_OFFSET, pb.MessagesResponse(records=record, record_count=1))

    def update_topic(self, req: pb.UpdateTopicRequest) -> bytes:
        self.topics.update(TopicConfig.from_pb(req.config))
        return response_envelope(pb.UPDATE_TOPIC)

    def get_topic(self, req: pb.GetTopicRequest) -> bytes:
        return response_envelope(pb.GET_TOPIC, self.topics.require(req.topic).to_pb())

    def group_backlog(self, req: pb.GroupBacklogRequest, visible: Callable[[str], bool]) -> bytes:
        """The group's backlog on the topics ``visible`` lets the caller see."""
        queues = [q for q in self.backlog(req.consumer_group, req.topic or None) if visible(q.topic)]
        return response_envelope(pb.GET_GROUP_BACKLOG, pb.GroupBacklogResponse(queues=queues))

    def backlog(self, group: str, topic: str | None) -> list[pb.QueueBacklog]:
        """Per queue of the group's topics: committed offset, max and min offset, gray (in a lane slot) or not and
        the lane holding its slot as this broker knows it ("" for a free slot).

        Delayed retries not yet delivered to a retry queue count in its max offset, so a drain
        does not finish while one is still on its way back.
        """
        topics = [topic] if topic else sorted(self._group_topics(group))
        queues = []
        for name in topics:
            config = self.topics.get(name)
            if config is None:
                continue
            for queue_id in range(config.queue_nums):
                lane = config.lane_of(queue_id)
                queues.append(pb.QueueBacklog(
                    topic=name, queue_id=queue_id, gray=lane is not None, lane=lane or "",
                    consumer_offset=self.offsets.query(group, name, queue_id),
                    max_offset=self.store.get_max_offset(name, queue_id) + self.schedule.pending(name, queue_id),
                    min_offset=self.store.get_min_offset(name, queue_id),
                ))
        return queues

    def _group_topics(self, group: str) -> set[str]:
        topics = set(self.offsets.topics_of(group))
        info = self.consumers.get(group)
        if info is not None:
            topics.update(info.subscription_table)
            topics.update(info.gray_subscription_table)
            for table in info.lane_subscription_tables.values():
                topics.update(table)
        return topics
