"""PULL_MESSAGE: gray isolation, filtering by the table of the client's flag, long polling."""

from __future__ import annotations

import asyncio

from graymq.broker_ext.groups.consumer_manager import ConsumerManager
from graymq.broker_ext.groups.group_info import ConsumerGroupInfo
from graymq.broker_ext.groups.offset_manager import ConsumerOffsetManager
from graymq.broker_ext.groups.queue_leases import QueueLocks
from graymq.broker_ext.processors.lock_processor import within_queue
from graymq.broker_ext.processors.pull_hold import PullRequestHoldService
from graymq.broker_ext.replication.role import ReplicaRole
from graymq.broker_ext.stats import BrokerStats
from graymq.broker_ext.store import GetResult, GetStatus, MessageStore
from graymq.broker_ext.topic_config import TopicConfig, TopicConfigManager
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.constants import parse_sub_expression
from graymq.protocol.errors import (
    GrayIsolationError,
    NoPermissionError,
    QueueLockedError,
    SubscriptionNotExistError,
)
from graymq.protocol.remoting import response_envelope

_STATUS = {
    GetStatus.FOUND: pb.FOUND,
    GetStatus.NO_NEW_MSG: pb.NO_NEW_MSG,
    GetStatus.NO_MATCHED_MSG: pb.NO_MATCHED_MSG,
    GetStatus.OFFSET_ILLEGAL: pb.OFFSET_ILLEGAL_STATUS,
}
MAX_PULL_NUMS = 1024


def check_gray_isolation(config: TopicConfig, group: ConsumerGroupInfo | None, req: pb.PullRequest) -> None:
    """While the group's gray switch is on, gray queues belong to gray clients and the rest to normal ones.

    A normal client may pull a gray queue only when its rebalance adopted it (orphan policy
    ``adopt``: the group has no gray client left). With a weight and a gray client, the weighted
    normal queues (``protocol.gray.weighted_queue_ids``) belong to the gray side too.
    """
    if group is None or not group.gray_switch:
        return
    weighted = group.weighted_queues(config) if group.gray_weight else frozenset()
    if not config.gray_queue_nums and not weighted:
        return
    gray_queue = req.queue_id in config.gray_queues
    if req.gray_flag and not gray_queue and req.queue_id not in weighted:
        raise GrayIsolationError(
            f"gray client {req.client_id} of {req.consumer_group} may not pull normal queue {req.queue_id} "
            f"of {config.topic}"
        )
    if not req.gray_flag and gray_queue and not req.adopted:
        raise GrayIsolationError(
            f"normal client {req.client_id} of {req.consumer_group} may not pull gray queue {req.queue_id} "
            f"of {config.topic} (only an adopting rebalance may)"
        )
    if not req.gray_flag and req.queue_id in weighted:
        raise GrayIsolationError(
            f"normal client {req.client_id} of {req.consumer_group} may not pull queue {req.queue_id} of "
            f"{config.topic}: its gray side consumes it at weight {group.gray_weight}%"
        )


class PullProcessor:
    """A pull waits at most ``max_long_poll_ms`` for new messages, whatever it asked for."""

    def __init__(self, topics: TopicConfigManager, consumers: ConsumerManager, locks: QueueLocks,
                 offsets: ConsumerOffsetManager, store: MessageStore, holds: PullRequestHoldService,
                 stats: BrokerStats, role: ReplicaRole, *, max_long_poll_ms: int) -> None:
        self.topics = topics
        self.consumers = consumers
        self.locks = locks
        self.offsets = offsets
        self.store = store
        self.holds = holds
        self.stats = stats
        self.role = role
        self.max_long_poll_ms = max_long_poll_ms

    def pull(self, req: pb.PullRequest) -> bytes | asyncio.Future[bytes]:
        """The response, or when the pull is held (long polling) a future of it: no task per pull."""
        config = self.topics.require(req.topic)
        if not config.readable:
            raise NoPermissionError(f"topic {req.topic} is not readable")
        config.check_queue(req.queue_id)
        group = self.consumers.get(req.consumer_group)
        check_gray_isolation(config, group, req)
        tags = self._tags(group, req)
        owner = self.locks.check(req.consumer_group, req.topic, req.queue_id, req.client_id)
        if owner is not None:
            raise QueueLockedError(f"{req.topic}#{req.queue_id} of group {req.consumer_group} is held by client "
                                   f"{owner}")
        if req.commit_offset >= 0:  # a commit riding on the pull, kept within the queue's [min, max]
            self.role.fence()  # a commit changes state: the leader's alone, inside its lease
            offset = within_queue(self.store, req.topic, req.queue_id, req.commit_offset)
            self.offsets.commit(req.consumer_group, req.topic, req.queue_id, offset)
        max_nums = max(1, min(req.max_msg_nums or 32, MAX_PULL_NUMS))
        result = self.store.get_messages(req.topic, req.queue_id, req.queue_offset, max_nums, tags)
        timeout_s = min(req.suspend_timeout_ms, self.max_long_poll_ms) / 1000
        if result.status is GetStatus.NO_NEW_MSG and timeout_s > 0:
            return self._hold(config, req, result, max_nums, tags, timeout_s)
        return self._respond(config, req, result)

    def _hold(self, config: TopicConfig, req: pb.PullRequest, result: GetResult, max_nums: int,
              tags: frozenset[str] | None, timeout_s: float) -> asyncio.Future[bytes]:
        response: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

        def answer(woken: bool) -> None:
            if response.done():  # cancelled: the connection closed while the pull was held
                return
            try:
                found = self.store.get_messages(
                    req.topic, req.queue_id, req.queue_offset, max_nums, tags) if woken else result
                response.set_result(self._respond(config, req, found))
            except Exception as exc:  # runs inside an append (notify): the connection answers and logs it
                response.set_exception(exc)

        self.holds.hold(req.topic, req.queue_id, timeout_s, answer)
        return response

    def _tags(self, group: ConsumerGroupInfo | None, req: pb.PullRequest) -> frozenset[str] | None:
        subscription = group.find_subscription(req.topic, req.gray_flag) if group else None
        if subscription is not None:
            return subscription.tags
        if req.sub_expression:
            return parse_sub_expression(req.sub_expression)
        side = "gray" if req.gray_flag else "normal"
        raise SubscriptionNotExistError(
            f"group {req.consumer_group} has no {side} subscription to {req.topic}; heartbeat first"
        )

    def _respond(self, config: TopicConfig, req: pb.PullRequest, result: GetResult) -> bytes:
        count = len(result.records)
        if count:
            self.stats.on_get(req.topic, req.queue_id in config.gray_queues, count)
        response = pb.PullResponse(
            status=_STATUS[result.status], next_begin_offset=result.next_begin_offset,
            min_offset=result.min_offset, max_offset=result.max_offset,
            records=b"".join(result.records), record_count=count,
        )
        return response_envelope(pb.PULL_MESSAGE, response)
