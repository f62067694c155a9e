"""QueryRoute: a topic's message queues on every broker of the cluster that serves gRPC, each with its endpoints.

The brokers come from the name server's route of the topic (``ClusterRoutes``: each broker registers its gRPC
address there), cached for a few seconds per topic, so a stock client connected to any broker learns every
broker's queues and spreads its sends and receives over all of them, as on RocketMQ's proxy. A broker without a
gRPC address is left out (stock clients cannot reach it). When no name server answers (or none is configured),
the answer is this broker's own queues, as a lone broker has them; the outage is logged once, its end once.

Every queue is listed, gray and normal alike, with the topic's permission and the message types the endpoint
takes (normal, FIFO and delayed). A stock producer's queue choice does not matter: the broker picks the queue of each
send (``send``). Consumers are told their queues by QueryAssignment instead of choosing from this list: the
assignment is where the gray split of receiving goes, so this answer can stay the same for every client.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from graymq.broker_ext.grpc_endpoint.credentials import Caller
from graymq.broker_ext.grpc_endpoint.status import OK, RocketMQStatusError, existing_topic
from graymq.broker_ext.topic_config import PERM_READ, PERM_WRITE, TopicConfig
from graymq.nameserver_api.client import NameServerClient, NotFoundError
from graymq.protocol.errors import GrayMQError
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from graymq.protocol.rocketmq_v2 import service_pb2 as v2s

log = logging.getLogger(__name__)

ACCEPT_MESSAGE_TYPES = (v2.NORMAL, v2.FIFO, v2.DELAY)
ROUTE_TTL_S = 5.0  # how long a topic's route from the name server is served before it is read again
MAX_CACHED_TOPICS = 1024  # beyond, the expired routes are dropped (clients may ask for any name)


def permission(perm: int) -> int:
    """RocketMQ 5's permission for a graymq topic's ``perm`` bits.

    >>> permission(PERM_READ | PERM_WRITE) == v2.READ_WRITE, permission(PERM_READ) == v2.READ
    (True, True)
    """
    readable, writable = bool(perm & PERM_READ), bool(perm & PERM_WRITE)
    if readable and writable:
        return v2.READ_WRITE
    return v2.READ if readable else v2.WRITE if writable else v2.NONE


def endpoints(address: str) -> v2.Endpoints:
    """``host:port`` as RocketMQ endpoints (IPv4 for an address, else a domain name)."""
    host, _, port = address.rpartition(":")
    scheme = v2.IPv4 if host.replace(".", "").isdigit() else v2.DOMAIN_NAME
    return v2.Endpoints(scheme=scheme, addresses=[v2.Address(host=host, port=int(port))])


@dataclass(frozen=True, slots=True)
class BrokerQueues:
    """One broker of a topic's route that stock clients can reach: its gRPC address and the topic's layout there."""

    broker_name: str
    grpc_address: str
    queue_nums: int
    perm: int


def broker_queues(broker: BrokerQueues, topic: v2.Resource) -> list[v2.MessageQueue]:
    """Every queue of ``topic`` on ``broker`` as RocketMQ messages."""
    where = v2.Broker(name=broker.broker_name, id=0, endpoints=endpoints(broker.grpc_address))
    return [v2.MessageQueue(topic=topic, id=queue_id, permission=permission(broker.perm),  # type: ignore[arg-type]
                            broker=where, accept_message_types=ACCEPT_MESSAGE_TYPES)
            for queue_id in range(broker.queue_nums)]


@functools.lru_cache(maxsize=MAX_CACHED_TOPICS)
def route_answer(brokers: tuple[BrokerQueues, ...], topic_name: str, namespace: str) -> v2s.QueryRouteResponse:
    """QueryRoute's answer: ``brokers``' queues of the topic, built once per topic and layout (built for each call, a
    route's 200 queues were 8 % of a broker's CPU with 500 stock clients). Shared, so never changed."""
    topic = v2.Resource(name=topic_name, resource_namespace=namespace)
    return v2s.QueryRouteResponse(status=OK, message_queues=[
        queue for broker in brokers for queue in broker_queues(broker, topic)])


def brokers_of_route(raw: dict[str, Any]) -> list[BrokerQueues]:
    """The brokers of a name server's ``TopicRoute`` JSON that registered a gRPC address, by name.

    >>> brokers_of_route({"brokers": [{"broker_name": "b", "address": "h:1", "grpc_address": "h:2", "queue_nums": 4,
    ...                                "perm": 6}, {"broker_name": "a", "address": "h:3", "queue_nums": 4}]})
    [BrokerQueues(broker_name='b', grpc_address='h:2', queue_nums=4, perm=6)]
    """
    return sorted((BrokerQueues(str(b["broker_name"]), str(b["grpc_address"]), int(b["queue_nums"]),
                                int(b.get("perm", PERM_READ | PERM_WRITE)))
                   for b in raw["brokers"] if b.get("grpc_address")), key=lambda b: b.broker_name)


class ClusterRoutes:
    """``await brokers(topic)``: the topic's gRPC brokers from the name server, ``None`` when none answers.

    An answer (a failure too) is kept ``ttl_s`` seconds per topic; the QueryRoutes arriving while one is read share
    that read. A topic the name server does not know has no brokers (``[]``). The reads share one name-server client
    (its connections kept): one made per read built an HTTP client and its TLS context each time, 4 % of a broker's
    CPU with 500 stock clients. ``close`` ends it."""

    def __init__(self, nameserver_urls: list[str], token: str | None, ttl_s: float = ROUTE_TTL_S) -> None:
        self.nameserver_urls = nameserver_urls
        self.token = token
        self.ttl_s = ttl_s
        self.reads = 0
        self._cache: dict[str, tuple[float, list[BrokerQueues] | None]] = {}  # topic -> (monotonic read at, brokers)
        self._reading: dict[str, asyncio.Task[list[BrokerQueues] | None]] = {}
        self._unreachable = False
        self._nameserver: NameServerClient | None = None

    async def close(self) -> None:
        if self._nameserver is not None:
            await self._nameserver.close()
            self._nameserver = None

    def __len__(self) -> int:
        """How many topics' answers are cached."""
        return len(self._cache)

    async def brokers(self, topic: str) -> list[BrokerQueues] | None:
        entry = self._cache.get(topic)
        if entry is not None and time.monotonic() - entry[0] < self.ttl_s:
            return entry[1]
        task = self._reading.get(topic)
        if task is None:
            task = self._reading[topic] = asyncio.get_running_loop().create_task(self._read(topic),
                                                                                name=f"grpc-route-{topic}")
            task.add_done_callback(lambda _: self._reading.pop(topic, None))
        return await asyncio.shield(task)

    async def _read(self, topic: str) -> list[BrokerQueues] | None:
        self.reads += 1
        if self._nameserver is None:
            self._nameserver = NameServerClient(self.nameserver_urls, token=self.token or None, timeout_s=2.0)
        brokers: list[BrokerQueues] | None
        try:
            brokers = brokers_of_route(await self._nameserver.request("GET", f"/v1/topics/{topic}/route"))
        except NotFoundError:
            brokers = []
        except (GrayMQError, KeyError, TypeError, ValueError) as exc:
            if not self._unreachable:
                log.warning("QueryRoute answers this broker's queues only: no name server gave the route of %s "
                            "(%s)", topic, exc)
            self._unreachable, brokers = True, None
        if brokers is not None and self._unreachable:
            self._unreachable = False
            log.info("QueryRoute answers every broker's queues again: the name server gave the route of %s", topic)
        now = time.monotonic()
        if len(self._cache) >= MAX_CACHED_TOPICS:
            self._cache = {t: entry for t, entry in self._cache.items() if now - entry[0] < self.ttl_s}
        self._cache[topic] = (now, brokers)
        return brokers


class RouteService:
    """``query_route``: the queues of a topic on every gRPC broker (``cluster``), else on this one at
    ``grpc_address``."""

    def __init__(self, broker_name: str, grpc_address: Callable[[], str],
                 topic_of: Callable[[str], TopicConfig | None], cluster: ClusterRoutes | None = None) -> None:
        self.broker_name = broker_name
        self._grpc_address = grpc_address
        self._topic_of = topic_of
        self._cluster = cluster

    async def close(self) -> None:
        if self._cluster is not None:
            await self._cluster.close()

    async def query_route(self, request: v2s.QueryRouteRequest, caller: Caller) -> v2s.QueryRouteResponse:
        topic = request.topic
        return route_answer(await self.brokers(topic, caller), topic.name, topic.resource_namespace)

    async def message_queues(self, topic: v2.Resource, caller: Caller) -> list[v2.MessageQueue]:
        """Every queue of ``topic`` with its broker's endpoints; ``FORBIDDEN`` / ``TOPIC_NOT_FOUND`` refused."""
        answer = route_answer(await self.brokers(topic, caller), topic.name, topic.resource_namespace)
        return list(answer.message_queues)  # the cached answer's: shared, read only

    async def brokers(self, topic: v2.Resource, caller: Caller) -> tuple[BrokerQueues, ...]:
        """The brokers whose queues of ``topic`` stock clients reach; ``FORBIDDEN`` / ``TOPIC_NOT_FOUND`` refused."""
        if not caller.principal.rights.may_use_topic(topic.name):
            raise RocketMQStatusError(v2.FORBIDDEN, f"principal {caller.principal.name} may not produce to or "
                                      f"consume topic {topic.name}")
        brokers = await self._cluster.brokers(topic.name) if self._cluster is not None else None
        if not brokers:
            config = existing_topic(self._topic_of, topic.name, self.broker_name)
            brokers = [BrokerQueues(self.broker_name, self._grpc_address(), config.queue_nums, config.perm)]
        return tuple(brokers)
