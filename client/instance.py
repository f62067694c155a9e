"""``ClientInstance``: the client side one ``ClientConfig`` builds, shared by the producers and consumers given
that config (RocketMQ's ``MQClientInstance``): one name-server client, one route cache, one set of broker
connections (whose consumers share the requests for a group's listing, client/group_listings.py), and one
name-server session (nameserver_api/session.py) carrying every client's heartbeats and watch:
the heartbeats due in one turn of the loop go out as one request (those of every client on the interval's grid;
a ``poke`` joins the requests of its turn), and one long poll watches every client's flags, each client acting on
its own answer as before; its consumers' broker heartbeats go one request per broker the same way
(client/broker_beats.py). A client joins it when built and leaves at ``stop()``; the last one out closes it, and
the next client given the config builds a new one.

The clients sharing an instance run on one event loop (its connections belong to the loop that opened them):
``loop``, the one its first client started on; a ``BlockingProducer`` runs its async parts there (or, first, on
graymq's shared loop, where the synchronous facades run too).
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable

from graymq.client.broker_beats import BrokerBeats
from graymq.client.config import ClientConfig
from graymq.client.group_listings import GroupListings
from graymq.client.route_cache import SharedRouteCache, SharedRoutes
from graymq.nameserver_api.client import NameServerClient
from graymq.nameserver_api.membership import Membership, new_client_id
from graymq.nameserver_api.session import NameServerSession
from graymq.protocol.broker_client import BrokerClient

GroupChanged = Callable[[str], None]
# id(config) -> its live instance. Weak: a client dropped without stop() leaves no instance behind; while the instance
# lives it holds its config, so the id is not reused.
_instances: weakref.WeakValueDictionary[int, ClientInstance] = weakref.WeakValueDictionary()
_joining = threading.Lock()  # BlockingProducers join from their callers' threads


class ClientInstance:
    """What the clients of one ``ClientConfig`` share; ``of(config)`` is the way to one."""

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self.nameserver = NameServerClient(list(config.nameserver), token=config.token,
                                           timeout_s=config.nameserver_timeout_s)
        self.session = NameServerSession(self.nameserver, window_s=0.0, timeout_s=config.nameserver_timeout_s)
        self.routes = SharedRoutes(config.route_ttl_s)
        self.brokers = BrokerClient(on_group_changed=self._group_changed, timeout_s=config.broker_timeout_s,
                                    token=config.token or "", tls=config.tls, on_reconnected=self._reconnected)
        self.broker_beats = BrokerBeats(self.brokers, new_client_id("instance"))
        self.group_listings = GroupListings(self.brokers)
        self._on_group_changed: list[GroupChanged] = []
        self._users = 0
        self.loop: asyncio.AbstractEventLoop | None = None  # where its clients run, once the first one started

    @classmethod
    def of(cls, config: ClientConfig) -> ClientInstance:
        """The live instance of ``config`` (this very object, not an equal one), joined; built if there is none."""
        with _joining:
            instance = _instances.get(id(config))
            if instance is None:
                instance = _instances[id(config)] = cls(config)
            instance._users += 1
            return instance

    def route_view(self) -> SharedRouteCache:
        """A client's view of the shared routes (its ``topics()`` are the topics it used)."""
        return SharedRouteCache(self.nameserver, self.config.route_ttl_s, table=self.routes)

    def start_membership(self, membership: Membership) -> None:
        """Heartbeat ``membership`` (built over ``session``, ``aligned``) and watch it with the instance's other
        clients, until ``stop_membership``; the first one binds the instance to its running loop."""
        if self.loop is None or self.loop.is_closed():
            self.loop = asyncio.get_running_loop()
        membership.start(watch=False)
        self.session.watch(membership)

    async def stop_membership(self, membership: Membership) -> None:
        """No more heartbeats nor watching for ``membership`` (its client then unregisters, or goes stale)."""
        self.session.unwatch(membership)
        await membership.stop()

    def on_group_changed(self, callback: GroupChanged) -> None:
        """Call ``callback(group)`` when a broker says a consumer group changed (until ``leave(callback)``)."""
        self._on_group_changed.append(callback)

    def _group_changed(self, group: str) -> None:
        self.group_listings.changed(group)
        for callback in list(self._on_group_changed):
            callback(group)

    def _reconnected(self, address: str) -> None:
        self.broker_beats.reconnected(address)

    async def leave(self, on_group_changed: GroupChanged | None = None) -> None:
        """A client stops using the instance; the last one closes the broker connections and the name-server
        client."""
        if on_group_changed in self._on_group_changed:
            self._on_group_changed.remove(on_group_changed)
        self._users -= 1
        if self._users > 0:
            return
        if _instances.get(id(self.config)) is self:
            del _instances[id(self.config)]
        await self.routes.close()
        await self.broker_beats.close()
        await self.brokers.close()
        await self.session.close()  # and the name-server client
