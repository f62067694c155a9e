"""``ConsumerGroupInfo``: the clients of one consumer group and a subscription table per lane and base.

The lane extension of RocketMQ's ConsumerGroupInfo: a heartbeat updates only the table of the client's side (base,
or the lane it is in), so base (v1) clients and each lane's (v2, v3) clients of one group may subscribe to different
topics and tags. The ``gray`` lane's table is ``gray_subscription_table`` as before lanes; every other lane's is in
``lane_subscription_tables``. Each table is the union of the subscriptions its live clients reported (on a topic
subscribed with two expressions, the newest ``sub_version`` wins).

Every consumer of a group asks for the group's member list after each change, so a change costs the broker
one listing per member: the encoded GET_CONSUMER_LIST answer is kept (``listing``) until the group changes,
which makes each of those answers a copy of bytes rather than a group-sized protobuf build. Its
``last_heartbeat_ms`` are therefore those of each client's last change (what a consumer compares when two
brokers disagree), not of its last heartbeat.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from graymq.broker_ext.topic_config import TopicConfig
from graymq.core.queue_layout import GRAY_LANE, lane_weight_shares
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


def client_lane(gray_flag: bool, lane: str) -> str | None:
    """The lane a client (or its request) is in: None for base; with the gray flag its lane, "" meaning ``gray``.

    >>> client_lane(False, "v3"), client_lane(True, ""), client_lane(True, "v3")
    (None, 'gray', 'v3')
    """
    return (lane or GRAY_LANE) if gray_flag else None


def side_name(lane: str | None) -> str:
    """How messages name a client's side: ``normal``, ``gray`` (the ``gray`` lane) or ``lane L``."""
    if lane is None:
        return "normal"
    return "gray" if lane == GRAY_LANE else f"lane {lane}"


@dataclass(slots=True)
class ClientChannelInfo:
    client_id: str
    connection: Connection | None
    gray_flag: bool
    subscriptions: dict[str, SubscriptionData]
    last_heartbeat: float = field(default_factory=time.monotonic)
    last_heartbeat_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    lane: str | None = None  # the lane it is in (None: base; ``gray`` for a gray client that names none)


@dataclass(slots=True)
class ConsumerGroupInfo:
    group: str
    clients: dict[str, ClientChannelInfo] = field(default_factory=dict)
    subscription_table: dict[str, SubscriptionData] = field(default_factory=dict)
    gray_subscription_table: dict[str, SubscriptionData] = field(default_factory=dict)  # the ``gray`` lane's
    lane_subscription_tables: dict[str, dict[str, SubscriptionData]] = field(default_factory=dict)  # other lanes
    gray_switch: bool = False
    gray_weight: int = 0  # percent of each topic's base queues its ``gray`` lane consumes (while it has clients)
    lane_weights: dict[str, int] = field(default_factory=dict)  # every other lane's weight, as ``gray_weight``
    gray_clients: int = 0  # clients in the ``gray`` lane
    lane_clients: dict[str, int] = field(default_factory=dict)  # lane -> its clients (``gray`` included)
    consume_model: int = pb.CLUSTERING
    consume_from_where: int = pb.CONSUME_FROM_LAST_OFFSET
    listing: bytes | None = None  # the encoded consumer list, until the group changes (set by its reader)

    def update_client(
        self, client_id: str, connection: Connection | None, gray_flag: bool, subscriptions: list[SubscriptionData],
        lane: str = "",
    ) -> bool:
        """Record a heartbeat (``lane``: with ``gray_flag``, the client's lane, "" for ``gray``); returns whether
        membership, a side or a subscription table changed."""
        subs = {s.topic: s for s in subscriptions}
        in_lane = client_lane(gray_flag, lane)
        current = self.clients.get(client_id)
        changed = (current is None or current.gray_flag != gray_flag or current.lane != in_lane
                   or _expressions(current.subscriptions) != _expressions(subs))
        if current is None:
            self.clients[client_id] = ClientChannelInfo(client_id, connection, gray_flag, subs, lane=in_lane)
        else:
            current.connection = connection or current.connection
            current.gray_flag = gray_flag
            current.lane = in_lane
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

    def set_gray_allocation(self, gray_switch: bool, gray_weight: int,
                            lane_weights: dict[str, int] | None = None) -> bool:
        """Apply the switch and weights a heartbeat carries; returns whether any changed."""
        lane_weights = {lane: w for lane, w in (lane_weights or {}).items() if w and lane != GRAY_LANE}
        if (self.gray_switch, self.gray_weight, self.lane_weights) == (gray_switch, gray_weight, lane_weights):
            return False
        self.gray_switch, self.gray_weight, self.lane_weights = gray_switch, gray_weight, lane_weights
        self.listing = None
        return True

    @property
    def weights(self) -> tuple[tuple[str, int], ...]:
        """Every weighted lane's (lane, percent), ``gray``'s from ``gray_weight``, sorted."""
        weights = dict(self.lane_weights)
        if self.gray_weight:
            weights[GRAY_LANE] = self.gray_weight
        return tuple(sorted(weights.items()))

    def expired_clients(self, now: float, expiry_s: float) -> list[str]:
        return [c.client_id for c in self.clients.values() if now - c.last_heartbeat > expiry_s]

    def lane_table(self, lane: str | None) -> dict[str, SubscriptionData]:
        """The subscription table of ``lane`` (None: base); empty for a lane without clients."""
        if lane is None:
            return self.subscription_table
        if lane == GRAY_LANE:
            return self.gray_subscription_table
        return self.lane_subscription_tables.get(lane, {})

    def table_for(self, gray_flag: bool, lane: str = "") -> dict[str, SubscriptionData]:
        """The table of a client's side as its requests say it (``lane`` read only with ``gray_flag``)."""
        return self.lane_table(client_lane(gray_flag, lane))

    def find_subscription(self, topic: str, gray_flag: bool, lane: str = "") -> SubscriptionData | None:
        return self.table_for(gray_flag, lane).get(topic)

    def _rebuild_tables(self) -> None:
        tables: dict[str | None, dict[str, SubscriptionData]] = {None: {}, GRAY_LANE: {}}
        counts: dict[str, int] = {}
        for client in self.clients.values():
            table = tables.setdefault(client.lane, {})
            if client.lane is not None:
                counts[client.lane] = counts.get(client.lane, 0) + 1
            for topic, sub in client.subscriptions.items():
                known = table.get(topic)
                if known is None or sub.sub_version >= known.sub_version:
                    table[topic] = sub
        self.subscription_table = tables.pop(None)
        self.gray_subscription_table = tables.pop(GRAY_LANE)
        self.lane_subscription_tables = {lane: table for lane, table in tables.items() if lane is not None}
        self.listing = None
        self.lane_clients = counts
        self.gray_clients = counts.get(GRAY_LANE, 0)

    def weighted_queues(self, config: TopicConfig) -> dict[int, str]:
        """The base queues of ``config`` a lane consumes by its weight (queue id -> lane), of the lanes with a
        client in the group (``core.queue_layout.lane_weight_shares``); none while the switch is off."""
        weights = self.weights
        if not self.gray_switch or not weights:
            return {}
        shares = lane_weight_shares(config.queue_nums, config.gray_queue_nums, config.lane_slots, weights)
        return {q: lane for q, lane in shares.items() if self.lane_clients.get(lane)}


def _expressions(subs: dict[str, SubscriptionData]) -> dict[str, str]:
    return {topic: sub.sub_string for topic, sub in subs.items()}
