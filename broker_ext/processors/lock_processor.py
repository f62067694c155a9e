"""LOCK_QUEUES and UNLOCK_QUEUES: consumers take queue leases before pulling and hand them back with their
final offsets, so the next owner starts exactly where the previous one stopped."""

from __future__ import annotations

from collections.abc import Callable

from graymq.broker_ext.groups.offset_manager import ConsumerOffsetManager
from graymq.broker_ext.groups.queue_leases import QueueLocks
from graymq.broker_ext.store import MessageStore
from graymq.broker_ext.topic_config import TopicConfigManager
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.connection import Connection
from graymq.protocol.errors import BadRequestError
from graymq.protocol.remoting import response_envelope


def within_queue(store: MessageStore, topic: str, queue_id: int, offset: int) -> int:
    """``offset`` moved into the queue's [min, max]: no commit points outside what the queue holds."""
    return min(max(offset, store.get_min_offset(topic, queue_id)), store.get_max_offset(topic, queue_id))


class LockProcessor:
    def __init__(self, locks: QueueLocks, topics: TopicConfigManager, offsets: ConsumerOffsetManager,
                 store: MessageStore, notify_group: Callable[[str, str], None]) -> None:
        self.locks = locks
        self.topics = topics
        self.offsets = offsets
        self.store = store
        self.notify_group = notify_group

    def _checked(self, req: pb.LockQueuesRequest | pb.UnlockQueuesRequest) -> None:
        if not req.client_id or not req.consumer_group:
            raise BadRequestError("queue leases need a consumer_group and a client_id")
        for q in req.queues:
            self.topics.require(q.topic).check_queue(q.queue_id)

    def lock(self, conn: Connection, req: pb.LockQueuesRequest) -> bytes:
        self._checked(req)
        locked, held = self.locks.lock(req.consumer_group, req.client_id, conn,
                                       [(q.topic, q.queue_id) for q in req.queues])
        response = pb.LockQueuesResponse(
            locked=[pb.QueueRef(topic=t, queue_id=q, offset=-1) for t, q in locked],
            held=[pb.QueueOwner(topic=t, queue_id=q, client_id=owner) for t, q, owner in held])
        return response_envelope(pb.LOCK_QUEUES, response)

    def unlock(self, req: pb.UnlockQueuesRequest) -> bytes:
        """Commit each queue's final offset and release it; a queue another client holds now is left alone
        (its late commit would move the new owner's position)."""
        self._checked(req)
        released = []
        for q in req.queues:
            if self.locks.owner(req.consumer_group, q.topic, q.queue_id) not in (None, req.client_id):
                continue
            if q.offset >= 0:
                offset = within_queue(self.store, q.topic, q.queue_id, q.offset)
                self.offsets.commit(req.consumer_group, q.topic, q.queue_id, offset)
            self.locks.unlock(req.consumer_group, req.client_id, q.topic, q.queue_id)
            released.append(f"{q.topic}#{q.queue_id}")
        if released:
            self.notify_group(req.consumer_group, f"client {req.client_id} released {' '.join(released)}")
        return response_envelope(pb.UNLOCK_QUEUES)
