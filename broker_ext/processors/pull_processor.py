"""PULL_MESSAGE: lane isolation, filtering by the table of the client's side (base or its lane), long polling."""

from __future__ import annotations

import asyncio

from graymq.broker_ext.groups.consumer_manager import ConsumerManager
from graymq.broker_ext.groups.group_info import ConsumerGroupInfo, client_lane, side_name
from graymq.broker_ext.groups.offset_manager import ConsumerOffsetManager
from graymq.broker_ext.groups.queue_leases import QueueLocks
from graymq.broker_ext.processors.lock_processor import within_queue
from graymq.broker_ext.processors.pull_hold import PullRequestHoldService
from graymq.broker_ext.replication.role import ReplicaRole
from graymq.broker_ext.stats import BrokerStats
from graymq.broker_ext.store import GetResult, GetStatus, MessageStore
from graymq.broker_ext.topic_config import TopicConfig, TopicConfigManager
from graymq.core.queue_layout import GRAY_LANE
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
    """While the group's gray switch is on, each lane slot's queues belong to the clients of the lane holding it and
    the base queues to base (normal) clients.

    A base client may pull a lane's queue only when its rebalance adopted it (the lane has no client in the group
    and its orphan policy is ``adopt``). A lane with a weight and a client in the group holds its share of the base
    queues too (``core.queue_layout.lane_weight_shares``). The broker's lane map may lag the
    name server's by a registration, so a lane client is refused only a slot the broker knows another lane holds:
    a slot it believes free, or any slot while it has heard no lane map, may be the client's own.
    """
    if group is None or not group.gray_switch:
        return
    weighted = group.weighted_queues(config) if group.gray_weight or group.lane_weights else {}
    if not config.gray_queue_nums and not weighted:
        return
    lane = client_lane(req.gray_flag, req.lane)
    holder = config.lane_of(req.queue_id)  # no lane map heard: slot 0 is the gray lane's
    if lane is None:
        _check_base_client(config, group, req, holder, weighted)
        return
    if holder is None and weighted.get(req.queue_id) != lane:
        kind = "normal" if lane == GRAY_LANE else "base"
        raise GrayIsolationError(f"{side_name(lane)} client {req.client_id} of {req.consumer_group} may not pull "
                                 f"{kind} queue {req.queue_id} of {config.topic}")
    if holder and holder != lane and config.lanes is not None:
        raise GrayIsolationError(f"{side_name(lane)} client {req.client_id} of {req.consumer_group} may not pull "
                                 f"queue {req.queue_id} of {config.topic}: lane {holder} holds its slot")


def _check_base_client(config: TopicConfig, group: ConsumerGroupInfo, req: pb.PullRequest, holder: str | None,
                       weighted: dict[int, str]) -> None:
    """A base client's pull: not a lane's queue unless adopted, not a base queue a lane holds by its weight."""
    who = f"normal client {req.client_id} of {req.consumer_group}"
    if holder == GRAY_LANE and not req.adopted:
        raise GrayIsolationError(f"{who} may not pull gray queue {req.queue_id} of {config.topic} (only an adopting "
                                 "rebalance may)")
    if holder is not None and not req.adopted:
        held = f"lane {holder} holds its slot" if holder else "it is in a free lane slot"
        raise GrayIsolationError(f"{who} may not pull queue {req.queue_id} of {config.topic}: {held} (only an "
                                 "adopting rebalance may)")
    lane = weighted.get(req.queue_id)
    if lane == GRAY_LANE:
        raise GrayIsolationError(f"{who} may not pull queue {req.queue_id} of {config.topic}: its gray side "
                                 f"consumes it at weight {group.gray_weight}%")
    if lane is not None:
        raise GrayIsolationError(f"{who} may not pull queue {req.queue_id} of {config.topic}: lane {lane} "
                                 f"consumes it at weight {group.lane_weights.get(lane, 0)}%")


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
        subscription = group.find_subscription(req.topic, req.gray_flag, req.lane) if group else None
        if subscription is not None:
            return subscription.tags
        if req.sub_expression:
            return parse_sub_expression(req.sub_expression)
        side = side_name(client_lane(req.gray_flag, req.lane))
        raise SubscriptionNotExistError(
            f"group {req.consumer_group} has no {side} subscription to {req.topic}; heartbeat first"
        )

    def _respond(self, config: TopicConfig, req: pb.PullRequest, result: GetResult) -> bytes:
        count = len(result.records)
        if count:
            self.stats.on_get(req.topic, config.lane_of(req.queue_id), count)
        response = pb.PullResponse(
            status=_STATUS[result.status], next_begin_offset=result.next_begin_offset,
            min_offset=result.min_offset, max_offset=result.max_offset,
            records=b"".join(result.records), record_count=count,
        )
        return response_envelope(pb.PULL_MESSAGE, response)
