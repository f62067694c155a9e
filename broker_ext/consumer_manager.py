"""All consumer groups of this broker: heartbeats in, "group changed" pushes out, idle clients expired."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from graymq.broker_ext.group_info import ConsumerGroupInfo, SubscriptionData
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.connection import Connection

log = logging.getLogger(__name__)


class ConsumerManager:
    """RocketMQ's consumerTable: group name -> ConsumerGroupInfo."""

    def __init__(self, expiry_s: float, on_client_left: Callable[[str, str], None] = lambda group, client: None
                 ) -> None:
        self.expiry_s = expiry_s
        self.groups: dict[str, ConsumerGroupInfo] = {}
        self._on_client_left = on_client_left  # (group, client id): e.g. its queue leases end

    def get(self, group: str) -> ConsumerGroupInfo | None:
        return self.groups.get(group)

    def register(self, client_id: str, connection: Connection | None, data: pb.ConsumerData) -> bool:
        """Apply one consumer heartbeat; notifies the group when it changed. Returns whether it changed."""
        info = self.groups.get(data.group)
        if info is None:
            info = self.groups[data.group] = ConsumerGroupInfo(data.group)
        info.consume_model = data.consume_model
        info.consume_from_where = data.consume_from_where
        switch_changed = info.gray_switch != data.gray_switch or info.gray_weight != data.gray_weight
        info.gray_switch = data.gray_switch
        info.gray_weight = data.gray_weight
        subs = [SubscriptionData.from_pb(s) for s in data.subscriptions]
        changed = info.update_client(client_id, connection, data.gray_flag, subs) or switch_changed
        if connection is not None:
            groups = connection.attributes.setdefault("consumer_groups", set())
            assert isinstance(groups, set)
            groups.add((data.group, client_id))
        if changed:
            side = "gray" if data.gray_flag else "normal"
            self.notify(info, f"client {client_id} ({side}) heartbeat changed the group")
        return changed

    def unregister(self, group: str, client_id: str, reason: str) -> None:
        info = self.groups.get(group)
        if info is not None and info.remove_client(client_id):
            log.info("consumer %s left group %s: %s", client_id, group, reason)
            self._on_client_left(group, client_id)
            self.notify(info, f"client {client_id} left: {reason}")
            if not info.clients:
                del self.groups[group]

    def connection_closed(self, connection: Connection) -> None:
        memberships = connection.attributes.get("consumer_groups")
        if isinstance(memberships, set):
            for group, client_id in list(memberships):
                info = self.groups.get(group)
                client = info.clients.get(client_id) if info else None
                if client is not None and client.connection is connection:
                    self.unregister(group, client_id, "connection closed")

    def scan_expired(self) -> None:
        now = time.monotonic()
        for group, info in list(self.groups.items()):
            for client_id in info.expired_clients(now, self.expiry_s):
                self.unregister(group, client_id, "no heartbeat")

    def notify_group(self, group: str, reason: str) -> None:
        info = self.groups.get(group)
        if info is not None:
            self.notify(info, reason)

    def notify(self, info: ConsumerGroupInfo, reason: str) -> None:
        """Push NOTIFY_GROUP_CHANGED to every connected client of the group (one-way)."""
        notice = pb.GroupChangedNotice(consumer_group=info.group, reason=reason)
        for client in info.clients.values():
            if client.connection is not None and not client.connection.is_closed:
                client.connection.send_oneway(pb.NOTIFY_GROUP_CHANGED, notice)
