"""QueryRoute: a topic's message queues on this broker, each with the broker's gRPC endpoint.

Every queue is listed, gray and normal alike, with the topic's permission and the message types the endpoint
takes (normal and FIFO). A stock producer's queue choice does not matter: the broker picks the queue of each
send (``send``). Consumers will be told their queues by QueryAssignment instead of choosing from this list:
the assignment is where the gray split of receiving goes (gray clients get the gray queues, normal ones the
rest, as ``AllocateMessageQueueGray`` does), so this answer can stay the same for every client.
"""

from __future__ import annotations

from collections.abc import Callable

from graymq.broker_ext.grpc_endpoint.credentials import Caller
from graymq.broker_ext.grpc_endpoint.status import OK, RocketMQStatusError, existing_topic
from graymq.broker_ext.topic_config import PERM_READ, PERM_WRITE, TopicConfig
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from graymq.protocol.rocketmq_v2 import service_pb2 as v2s

ACCEPT_MESSAGE_TYPES = (v2.NORMAL, v2.FIFO)


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


class RouteService:
    """``query_route``: the queues of a topic this broker carries, at ``grpc_address``."""

    def __init__(self, broker_name: str, grpc_address: Callable[[], str],
                 topic_of: Callable[[str], TopicConfig | None]) -> None:
        self.broker_name = broker_name
        self._grpc_address = grpc_address
        self._topic_of = topic_of

    async def query_route(self, request: v2s.QueryRouteRequest, caller: Caller) -> v2s.QueryRouteResponse:
        return v2s.QueryRouteResponse(status=OK, message_queues=await self.message_queues(request.topic, caller))

    async def message_queues(self, topic: v2.Resource, caller: Caller) -> list[v2.MessageQueue]:
        """Every queue of ``topic`` with its broker's endpoints; ``FORBIDDEN`` / ``TOPIC_NOT_FOUND`` refused."""
        if not caller.principal.rights.may_use_topic(topic.name):
            raise RocketMQStatusError(v2.FORBIDDEN, f"principal {caller.principal.name} may not produce to or "
                                      f"consume topic {topic.name}")
        config = existing_topic(self._topic_of, topic.name, self.broker_name)
        broker = v2.Broker(name=self.broker_name, id=0, endpoints=endpoints(self._grpc_address()))
        return [v2.MessageQueue(topic=topic, id=queue_id, permission=permission(config.perm),  # type: ignore[arg-type]
                                broker=broker, accept_message_types=ACCEPT_MESSAGE_TYPES)
                for queue_id in range(config.queue_nums)]
