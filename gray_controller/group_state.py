"""A consumer group as the controller sees it: clients with flags and states, and the gray backlog.

Clients the name server reports stale (no heartbeat for ``GRAYMQ_CLIENT_STALE_SECONDS``: killed,
partitioned, paused) are kept apart in ``stale``: promote and rollback do not wait for stale
consumers (they wait for stale gray producers, see ``cutover``); their topics still count for the
gray backlog. The JSON shape lists every client in ``clients`` with a ``stale`` mark, and the
stale ones again in ``stale_clients``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from graymq.client.backlog import QueueBacklog, gray_backlog
from graymq.client.broker_client import BrokerClient
from graymq.client.nameserver_client import NameServerClient, NotFoundError
from graymq.client.route_cache import RouteCache

CONSUMING_ROLES = ("consumer", "spark")


@dataclass
class GroupStatus:
    group: str
    gray_switch: bool
    orphan_policy: str
    clients: list[dict[str, Any]]
    queues: list[QueueBacklog] = field(default_factory=list)
    stale: list[dict[str, Any]] = field(default_factory=list)

    @property
    def gray_backlog(self) -> int:
        return sum(q.backlog for q in self.queues)

    def gray_clients(self, roles: tuple[str, ...] = CONSUMING_ROLES) -> list[dict[str, Any]]:
        return [c for c in self.clients if c["role"] in roles and c["gray"]]

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group, "gray_switch": self.gray_switch, "orphan_policy": self.orphan_policy,
            "clients": sorted([_client_json(c, False) for c in self.clients]
                              + [_client_json(c, True) for c in self.stale],
                              key=lambda c: (c["role"], c["client_id"])),
            "gray_backlog": self.gray_backlog,
            "gray_queues": [{"topic": q.topic, "broker": q.broker_name, "queue_id": q.queue_id,
                             "consumer_offset": q.consumer_offset, "max_offset": q.max_offset, "backlog": q.backlog}
                            for q in self.queues],
            "stale_clients": [_client_json(c, True) for c in self.stale],
        }


def _client_json(client: dict[str, Any], stale: bool) -> dict[str, Any]:
    fields = ("client_id", "role", "labels", "explicit_gray", "desired_gray", "gray", "state", "queues", "topics",
              "last_seen")
    return {**{k: client.get(k) for k in fields}, "stale": stale}


class GroupInspector:
    """Reads a group's state from the name server and its gray backlog from the brokers."""

    def __init__(self, nameserver: NameServerClient) -> None:
        self.nameserver = nameserver
        self.routes = RouteCache(nameserver, ttl_s=5.0)
        # Reading backlogs is an operator's call: the admin token when there is one, else the client's own.
        self.brokers = BrokerClient(token=nameserver.admin_token or nameserver.token or "")

    async def close(self) -> None:
        await self.brokers.close()

    async def clients(self, group: str, role: str | None = None) -> dict[str, Any]:
        """The name server's view; a group it never heard of has no clients."""
        try:
            return await self.nameserver.group_clients(group, role)
        except NotFoundError:
            return {"group": group, "gray_switch": False, "orphan_policy": "hold", "clients": []}

    async def status(self, group: str, with_backlog: bool = True) -> GroupStatus:
        data = await self.clients(group)
        listed = sorted(data["clients"], key=lambda c: (c["role"], c["client_id"]))
        status = GroupStatus(group, bool(data["gray_switch"]), str(data.get("orphan_policy", "hold")),
                             [c for c in listed if not c.get("stale")], stale=[c for c in listed if c.get("stale")])
        if with_backlog:
            topics = {t for c in listed if c["role"] in CONSUMING_ROLES for t in c.get("topics") or []}
            status.queues = await gray_backlog(self.brokers, self.routes, group, topics)
        return status
