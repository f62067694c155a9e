"""The endpoint built from a running broker: each part gets only the broker collaborators it uses."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from graymq.broker_ext.grpc_endpoint.ack import AckService
from graymq.broker_ext.grpc_endpoint.budgets import Budget, BudgetLimits, Budgets
from graymq.broker_ext.grpc_endpoint.clients import ClientTable
from graymq.broker_ext.grpc_endpoint.consumer_sides import BrokerView, ConsumerSides
from graymq.broker_ext.grpc_endpoint.credentials import Credentials
from graymq.broker_ext.grpc_endpoint.producer_sides import ProducerSides
from graymq.broker_ext.grpc_endpoint.receive import ReceiveService
from graymq.broker_ext.grpc_endpoint.renewals import AutoRenewals
from graymq.broker_ext.grpc_endpoint.route import ClusterRoutes, RouteService
from graymq.broker_ext.grpc_endpoint.send import DelayFn, SendService
from graymq.broker_ext.grpc_endpoint.server import ConnectionLimits, GrpcEndpoint
from graymq.broker_ext.grpc_endpoint.settings import EndpointLimits
from graymq.broker_ext.pop.receipt import ReceiptSigner, load_secret
from graymq.broker_ext.pop.service import PopService
from graymq.broker_ext.topic_config import TopicConfig, lane_pairs
from graymq.core.queue_layout import GRAY_LANE
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.constants import PROPERTY_ORIGIN_MSG_ID, PROPERTY_RETRY_TOPIC
from graymq.protocol.errors import GrayMQError
from graymq.protocol.record import MessageExt

if TYPE_CHECKING:
    from graymq.broker_ext.broker_controller import BrokerController
    from graymq.broker_ext.config import BrokerSettings

log = logging.getLogger(__name__)

MAX_BODY_SIZE = 4 << 20  # RocketMQ's default
HEADROOM = 64 << 10  # a stored message must fit a graymq pull frame with its properties; a request, its message


async def start_grpc_endpoint(broker: BrokerController, settings: BrokerSettings, port: int
                              ) -> tuple[GrpcEndpoint, str]:
    """Serve MessagingService on ``port`` of the broker's host (over TLS with the broker's certificate when it has
    one); the endpoint and its ``host:port`` for clients (the broker address's host)."""
    max_body_size = min(MAX_BODY_SIZE, max(settings.max_frame_size // 2, settings.max_frame_size - HEADROOM))
    limits = EndpointLimits(max_body_size=max_body_size,
                            long_polling_timeout_s=min(20.0, settings.max_long_poll_ms / 1000),
                            delay_levels_s=settings.delay_levels_s,
                            auto_renew_invisible_s=settings.grpc_auto_renew_invisible_ms / 1000)
    budgets = Budgets(BudgetLimits(**{b.value: getattr(settings, f"grpc_max_{b.value}") for b in Budget}),
                      refused=broker.stats.grpc_refused)
    sides = ProducerSides(settings.nameserver_urls, interval_s=settings.register_interval_s,
                          expiry_s=settings.client_expiry_s, budgets=budgets, lanes_heard=lane_maps(broker))
    consumers = consumer_sides(broker, settings, sides)
    tls = None
    if settings.tls_cert is not None and settings.tls_key is not None:
        tls = (settings.tls_key.read_bytes(), settings.tls_cert.read_bytes())
    address = ""  # the route's endpoint: known once bound, read at each QueryRoute
    cluster = ClusterRoutes(settings.nameserver_urls, settings.token.strip()) if settings.nameserver_urls else None
    endpoint = GrpcEndpoint(
        Credentials(broker.principals, dev_mode=settings.dev_mode, throttle=broker.access.throttle,
                    refresh=lambda: _refresh_principals(broker)),
        RouteService(broker.name, lambda: address, broker.topics.get, cluster),
        ClientTable(limits, sides, consumers),
        SendService(broker.name, broker.send_processor.send, broker.topics.get, sides, limits.max_body_size,
                    delay=delayed_send(broker)),
        max_request_size=max_body_size + HEADROOM, budgets=budgets, malformed=broker.stats.grpc_malformed, tls=tls,
        connections=ConnectionLimits(settings.grpc_max_connections, handshake_timeout_s=settings.auth_timeout_s,
                                     idle_timeout_s=settings.idle_timeout_s),
        refused_connection=lambda: _count_rejected(broker),
    )
    endpoint.serve_pop(*pop_services(broker, settings, endpoint.clients, limits))
    bound = await endpoint.start(settings.host, port)
    address = f"{broker.address.rpartition(':')[0]}:{bound}"
    return endpoint, address


def lane_maps(broker: BrokerController) -> Callable[[str, Mapping[str, int]], None]:
    """Where a topic's lane map (lane -> slot) heard by the endpoint from the name server goes: the broker's topic
    table, as its own registration would apply it a moment later. A map naming no lane (every slot given back) is
    not applied (the broker keeps the last one it heard), nor one the broker's layout of the topic cannot hold yet
    (its registration brings the grown topic)."""

    def heard(topic: str, lanes: Mapping[str, int]) -> None:
        config = broker.topics.get(topic)
        if config is None or not lanes or config.lanes == lane_pairs(lanes):
            return
        try:
            broker.topics.update(replace(config, lanes=lane_pairs(lanes)))
        except GrayMQError as exc:
            log.info("lane map %s of topic %s not applied yet: %s", dict(lanes), topic, exc.message)

    return heard


def delayed_send(broker: BrokerController) -> DelayFn:
    """A delayed message sent through the broker's send path (topic checks, flush and replication waits), stored in
    its schedule service until due."""

    def send(request: pb.SendRequest, deliver_at_ms: int, now_ms: int) -> bytes | asyncio.Future[bytes]:
        return broker.send_processor.send_held(
            request, lambda put: broker.schedule.schedule_at(put, deliver_at_ms, now_ms))

    return send


def consumer_sides(broker: BrokerController, settings: BrokerSettings, producers: ProducerSides) -> ConsumerSides:
    """Stock consumers' sides, reading the broker's topics, backlog and graymq consumers (one owner table of client
    ids with the producers')."""

    def graymq_lanes(group: str) -> frozenset[str]:
        info = broker.consumers.get(group)
        if info is None:
            return frozenset()
        return frozenset(lane for lane, count in info.lane_clients.items() if count)

    def lane_shares(group: str, config: TopicConfig) -> frozenset[int]:
        info = broker.consumers.get(group)
        weighted = info.weighted_queues(config) if info is not None else {}
        return frozenset(q for q, lane in weighted.items() if lane != GRAY_LANE)

    view = BrokerView(broker.topics.get, broker.admin_processor.backlog, graymq_lanes,
                      lanes_heard=producers.lanes_heard, lane_shares=lane_shares)
    return ConsumerSides(settings.nameserver_urls, view, broker_name=broker.name, claim=producers.claim,
                         interval_s=settings.register_interval_s, expiry_s=settings.client_expiry_s,
                         budgets=producers.budgets, sessions=producers.registrations.sessions,
                         gone=producers.release_unused)


def pop_services(broker: BrokerController, settings: BrokerSettings, clients: ClientTable, limits: EndpointLimits
                 ) -> tuple[ReceiveService, AckService]:
    """Pop consumption on the broker's store: handles signed with the broker's secret, acks journaled in its config
    directory, dead letters through its send-back path, queues leased by graymq push consumers skipped (and a lease
    refused on a queue pop consumers use)."""
    config_dir = settings.store_dir / "config"

    def dead_letter(group: str, message: MessageExt, attempts: int) -> None:
        properties = {PROPERTY_RETRY_TOPIC: message.topic, PROPERTY_ORIGIN_MSG_ID: message.msg_id,
                      **message.properties}
        broker.send_back_processor.dead_letter(group, message, properties, attempts + 1)

    pop = PopService(broker.store, broker.offsets, broker.holds, ReceiptSigner(load_secret(config_dir / "pop_secret")),
                     dead_letter, broker.locks.owner)
    pop.open_journal(config_dir / "pop_acks.journal", sync=settings.flush == "sync",  # acks as durable as messages
                     interval_s=settings.flush_interval_ms / 1000)
    pop.fence = broker.role.fence  # a broker set's follower refuses: its pop state would not survive a failover
    broker.locks.pop_busy = pop.busy
    clients.consumers.broker = replace(clients.consumers.broker, in_flight=pop.in_flight)  # a drain waits for them
    # a client is there to renew for while a telemetry stream of its is open (its settings are known)
    renewals = AutoRenewals(pop, lambda client_id: client_id in clients.clients, limits.auto_renew_max_s)
    receives = ReceiveService(pop, broker.topics.get, clients, clients.consumers.queues, limits, broker.name,
                              renewals)
    return receives, AckService(pop, renewals)


def _count_rejected(broker: BrokerController) -> None:
    broker.stats.grpc_connections_rejected += 1


async def _refresh_principals(broker: BrokerController) -> None:
    """Read the principals now, through the broker port's refresh (one read per interval for both ports); nothing
    without a name server."""
    if broker.access.refresh is not None:
        await broker.access.refresh()
