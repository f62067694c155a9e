"""All consumer groups of this broker: heartbeats in, "group changed" pushes out, idle clients expired."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from graymq.broker_ext.groups.group_info import ConsumerGroupInfo, SubscriptionData, client_lane, side_name
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.connection import Connection

log = logging.getLogger(__name__)

# Queue releases of one group are told to its members at most once per this many seconds (the first at once,
# the rest together at the end of the window): a rebalance wave releases a queue per moving member, and
# telling each release to every member made a join cost members × releases rebalances.
RELEASE_NOTICE_WINDOW_S = 0.05


class ConsumerManager:
    """RocketMQ's consumerTable: group name -> ConsumerGroupInfo."""

    def __init__(self, expiry_s: float, on_client_left: Callable[[str, str], None] = lambda group, client: None
                 ) -> None:
        self.expiry_s = expiry_s
        self.groups: dict[str, ConsumerGroupInfo] = {}
        self._on_client_left = on_client_left  # (group, client id): e.g. its queue leases end
        # group -> reasons of the releases waiting for the end of the group's window (absent: no window open)
        self._held_notices: dict[str, list[str]] = {}

    def get(self, group: str) -> ConsumerGroupInfo | None:
        return self.groups.get(group)

    def register(self, client_id: str, connection: Connection | None, data: pb.ConsumerData) -> bool:
        """Apply one consumer heartbeat; notifies the group when it changed. Returns whether it changed."""
        info = self.groups.get(data.group)
        if info is None:
            info = self.groups[data.group] = ConsumerGroupInfo(data.group)
        info.consume_model = data.consume_model
        info.consume_from_where = data.consume_from_where
        switch_changed = info.set_gray_allocation(data.gray_switch, data.gray_weight, dict(data.lane_weights))
        subs = [SubscriptionData.from_pb(s) for s in data.subscriptions]
        changed = info.update_client(client_id, connection, data.gray_flag, subs, data.lane) or switch_changed
        if connection is not None:
            groups = connection.attributes.setdefault("consumer_groups", set())
            assert isinstance(groups, set)
            groups.add((data.group, client_id))
        if changed:
            side = side_name(client_lane(data.gray_flag, data.lane))
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
        """Queue leases of ``group`` were released: its members hear it at once, or with the other releases at
        the end of the window (``RELEASE_NOTICE_WINDOW_S``) when one was told less than a window ago."""
        held = self._held_notices.get(group)
        if held is not None:
            held.append(reason)
            return
        self._held_notices[group] = []
        asyncio.get_running_loop().call_later(RELEASE_NOTICE_WINDOW_S, self._window_ended, group)
        self._notify_now(group, reason)

    def _window_ended(self, group: str) -> None:
        held = self._held_notices.pop(group, [])
        if held:
            self.notify_group(group, held[0] if len(held) == 1 else f"{held[0]} and {len(held) - 1} more releases")

    def _notify_now(self, group: str, reason: str) -> None:
        info = self.groups.get(group)
        if info is not None:
            self.notify(info, reason)

    def notify(self, info: ConsumerGroupInfo, reason: str) -> None:
        """Push NOTIFY_GROUP_CHANGED to every connection of the group's clients (one-way), once per connection:
        the consumers of one client instance share theirs, and each of them hears the notice from it."""
        notice = pb.GroupChangedNotice(consumer_group=info.group, reason=reason)
        connections = {id(c.connection): c.connection for c in info.clients.values() if c.connection is not None}
        for connection in connections.values():
            if not connection.is_closed:
                connection.send_oneway(pb.NOTIFY_GROUP_CHANGED, notice)
