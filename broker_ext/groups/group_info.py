"""``ConsumerGroupInfo``: the clients of one consumer group and its two subscription tables.

The gray extension of RocketMQ's ConsumerGroupInfo: a heartbeat updates only the table of
the client's flag, so gray (v2) and normal (v1) clients of one group may subscribe to
different topics and tags. Each table is the union of the subscriptions its live clients
reported (on a topic subscribed with two expressions, the newest ``sub_version`` wins).

Every consumer of a group asks for the group's member list after each change, so a change costs the broker
one listing per member: the encoded GET_CONSUMER_LIST answer is kept (``listing``) until the group changes,
which makes each of those answers a copy of bytes rather than a group-sized protobuf build. Its
``last_heartbeat_ms`` are therefore those of each client's last change (what a consumer compares when two
brokers disagree), not of its last heartbeat.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field

from graymq.broker_ext.topic_config import TopicConfig
from graymq.core.queue_layout import weighted_queue_ids
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.connection import Connection
from graymq.protocol.constants import parse_sub_expression


@dataclass(frozen=True, slots=True)
class SubscriptionData:
    topic: str
    sub_string: str = "*"
    sub_version: int = 0

    @property
    def tags(self) -> frozenset[str] | None:
        return parse_sub_expression(self.sub_string)

    def to_pb(self) -> pb.SubscriptionData:
        return pb.SubscriptionData(topic=self.topic, sub_string=self.sub_string, sub_version=self.sub_version)

    @classmethod
    def from_pb(cls, msg: pb.SubscriptionData) -> SubscriptionData:
        return cls(msg.topic, msg.sub_string or "*", msg.sub_version)


@dataclass(slots=True)
class ClientChannelInfo:
    client_id: str
    connection: Connection | None
    gray_flag: bool
    subscriptions: dict[str, SubscriptionData]
    last_heartbeat: float = field(default_factory=time.monotonic)
    last_heartbeat_ms: int = field(default_factory=lambda: int(time.time() * 1000))


@dataclass(slots=True)
class ConsumerGroupInfo:
    group: str
    clients: dict[str, ClientChannelInfo] = field(default_factory=dict)
    subscription_table: dict[str, SubscriptionData] = field(default_factory=dict)
    gray_subscription_table: dict[str, SubscriptionData] = field(default_factory=dict)
    gray_switch: bool = False
    gray_weight: int = 0  # percent of each topic's normal queues its gray clients consume (while it has some)
    gray_clients: int = 0
    consume_model: int = pb.CLUSTERING
    consume_from_where: int = pb.CONSUME_FROM_LAST_OFFSET
    listing: bytes | None = None  # the encoded consumer list, until the group changes (set by its reader)

    def update_client(
        self, client_id: str, connection: Connection | None, gray_flag: bool, subscriptions: list[SubscriptionData]
    ) -> bool:
        """Record a heartbeat; returns whether membership, a flag or a subscription table changed."""
        subs = {s.topic: s for s in subscriptions}
        current = self.clients.get(client_id)
        changed = (current is None or current.gray_flag != gray_flag
                   or _expressions(current.subscriptions) != _expressions(subs))
        if current is None:
            self.clients[client_id] = ClientChannelInfo(client_id, connection, gray_flag, subs)
        else:
            current.connection = connection or current.connection
            current.gray_flag = gray_flag
            current.subscriptions = subs
            current.last_heartbeat = time.monotonic()
            current.last_heartbeat_ms = int(time.time() * 1000)
        if changed:
            self._rebuild_tables()
        return changed

    def remove_client(self, client_id: str) -> bool:
        if self.clients.pop(client_id, None) is None:
            return False
        self._rebuild_tables()
        return True

    def set_gray_allocation(self, gray_switch: bool, gray_weight: int) -> bool:
        """Apply the switch and weight a heartbeat carries; returns whether either changed."""
        if (self.gray_switch, self.gray_weight) == (gray_switch, gray_weight):
            return False
        self.gray_switch, self.gray_weight = gray_switch, gray_weight
        self.listing = None
        return True

    def expired_clients(self, now: float, expiry_s: float) -> list[str]:
        return [c.client_id for c in self.clients.values() if now - c.last_heartbeat > expiry_s]

    def table_for(self, gray_flag: bool) -> dict[str, SubscriptionData]:
        return self.gray_subscription_table if gray_flag else self.subscription_table

    def find_subscription(self, topic: str, gray_flag: bool) -> SubscriptionData | None:
        return self.table_for(gray_flag).get(topic)

    def _rebuild_tables(self) -> None:
        normal: dict[str, SubscriptionData] = {}
        gray: dict[str, SubscriptionData] = {}
        for client in self.clients.values():
            table = gray if client.gray_flag else normal
            for topic, sub in client.subscriptions.items():
                known = table.get(topic)
                if known is None or sub.sub_version >= known.sub_version:
                    table[topic] = sub
        self.subscription_table = normal
        self.gray_subscription_table = gray
        self.listing = None
        self.gray_clients = sum(1 for c in self.clients.values() if c.gray_flag)

    def weighted_queues(self, config: TopicConfig) -> frozenset[int]:
        """The normal queues of ``config`` its gray clients consume: none without a weight or a gray client."""
        if not self.gray_switch or not self.gray_weight or not self.gray_clients:
            return frozenset()
        return weighted_ids(config.queue_nums, config.gray_queue_nums, self.gray_weight)


@functools.lru_cache(maxsize=1024)
def weighted_ids(queue_nums: int, gray_queue_nums: int, weight: int) -> frozenset[int]:
    return frozenset(weighted_queue_ids(queue_nums, gray_queue_nums, weight))


def _expressions(subs: dict[str, SubscriptionData]) -> dict[str, str]:
    return {topic: sub.sub_string for topic, sub in subs.items()}
