"""HEARTBEAT, UNREGISTER_CLIENT and GET_CONSUMER_LIST."""

from __future__ import annotations

import time

from graymq.broker_ext.groups.consumer_manager import ConsumerManager
from graymq.broker_ext.groups.queue_leases import QueueLocks
from graymq.broker_ext.topic_config import TopicConfigManager
from graymq.core.queue_layout import GRAY_LANE
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.connection import Connection
from graymq.protocol.constants import retry_topic
from graymq.protocol.errors import BadRequestError, ConsumerNotOnlineError
from graymq.protocol.names import check_group_name
from graymq.protocol.remoting import response_envelope


class ClientProcessor:
    def __init__(self, topics: TopicConfigManager, consumers: ConsumerManager, locks: QueueLocks) -> None:
        self.topics = topics
        self.consumers = consumers
        self.locks = locks

    def heartbeat(self, conn: Connection, req: pb.HeartbeatRequest) -> bytes:
        """Register every consumer the heartbeat carries: under its own ``client_id`` when it names one (a client
        instance's one heartbeat for all its consumers), else under the request's."""
        if not req.client_id:
            raise BadRequestError("heartbeat without client_id")
        for data in req.consumers:
            problem = check_group_name(data.group)
            if problem:
                raise BadRequestError(problem)
            if data.consume_model == pb.CLUSTERING:
                self.topics.ensure_retry_topic(retry_topic(data.group), self._lane_slots(data))
            client_id = data.client_id or req.client_id
            self.consumers.register(client_id, conn, data)
            self.locks.renew(data.group, client_id)
        return response_envelope(pb.HEARTBEAT, pb.HeartbeatResponse(
            broker_time_ms=int(time.time() * 1000), client_expiry_ms=int(self.consumers.expiry_s * 1000),
            queue_lease_ms=int(self.locks.ttl_s * 1000)))

    def _lane_slots(self, data: pb.ConsumerData) -> int:
        """The most lane slots of the topics ``data`` subscribes to here: its group's retry topic has as many, so
        each lane's retries have their slot."""
        configs = (self.topics.get(s.topic) for s in data.subscriptions)
        return max((c.lane_slots for c in configs if c is not None), default=1)

    def unregister(self, req: pb.UnregisterRequest) -> bytes:
        if req.consumer_group:
            self.consumers.unregister(req.consumer_group, req.client_id, "unregistered")
        return response_envelope(pb.UNREGISTER_CLIENT)

    def consumer_list(self, req: pb.ConsumerListRequest) -> bytes:
        """The group's members and subscription tables, encoded once per change of the group (``listing``)."""
        info = self.consumers.get(req.consumer_group)
        if info is None:
            raise ConsumerNotOnlineError(f"no consumer of group {req.consumer_group} is online on this broker")
        if info.listing is None:
            response = pb.ConsumerListResponse(
                clients=[
                    pb.ClientInfo(client_id=c.client_id, gray_flag=c.gray_flag,
                                  last_heartbeat_ms=c.last_heartbeat_ms, topics=sorted(c.subscriptions),
                                  lane=_wire_lane(c.lane))
                    for c in sorted(info.clients.values(), key=lambda c: c.client_id)
                ],
                subscriptions=[s.to_pb() for s in info.subscription_table.values()],
                gray_subscriptions=[s.to_pb() for s in info.gray_subscription_table.values()],
                gray_switch=info.gray_switch,
                lane_subscriptions=[
                    pb.LaneSubscriptions(lane=lane, subscriptions=[s.to_pb() for s in table.values()])
                    for lane, table in sorted(info.lane_subscription_tables.items())
                ],
            )
            info.listing = response_envelope(pb.GET_CONSUMER_LIST, response)
        return info.listing


def _wire_lane(lane: str | None) -> str:
    """A lane as the wire carries it next to the gray flag: "" for base and for ``gray`` (as before lanes)."""
    return "" if lane in (None, GRAY_LANE) else str(lane)
