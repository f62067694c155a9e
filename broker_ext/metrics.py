"""The broker's Prometheus metrics, served by ``prometheus_client`` on ``--metrics-port`` (``GET /metrics``).

Every value is read at scrape time by ``BrokerCollector``: the hot-path counters stay plain ints in
``BrokerStats`` / ``StoreStats`` (see ``stats.py`` for why), the rest is read from its owner.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from graymq.broker_ext.broker_controller import BrokerController
from graymq.broker_ext.grpc_endpoint.budgets import Budget
from graymq.broker_ext.stats import BrokerStats
from graymq.broker_ext.store.stats import StoreStats
from graymq.core.queue_layout import GRAY_LANE
from graymq.protocol.names import BASE_LANE

SCRAPE_TIMEOUT_S = 10.0


def _flag(gray: bool) -> str:
    return "true" if gray else "false"


def _side(lane: str | None) -> list[str]:
    """The ``gray`` and ``lane`` label values of a queue's lane (None: base, ``lane="base"``; a slot no lane holds:
    ``lane=""``)."""
    return [_flag(lane is not None), BASE_LANE if lane is None else lane]


class BrokerCollector(Collector):
    """The broker's metric families, built on the broker's event loop.

    The counters it reads are plain ints bumped on the send and pull paths: reading them here, at scrape
    time, is the whole cost, nothing per message. ``collect()`` is called on the HTTP server's thread; it
    hands the reading to the loop (which owns every dict it reads) and waits for it, so a scrape never
    iterates a table the loop is changing.
    """

    def __init__(self, broker: BrokerController, loop: asyncio.AbstractEventLoop) -> None:
        self._broker = broker
        self._loop = loop

    def collect(self) -> Iterator[Metric]:
        async def read() -> list[Metric]:
            return self.families()

        return iter(asyncio.run_coroutine_threadsafe(read(), self._loop).result(SCRAPE_TIMEOUT_S))

    def families(self) -> list[Metric]:
        """Every family with its current samples (call on the broker's loop)."""
        broker = self._broker
        return [
            *_traffic_families(broker.stats),
            _backlog_family(broker),
            *_flush_families(broker.store.stats),
            GaugeMetricFamily("graymq_broker_commitlog_max_offset", "End of the commit log.",
                              broker.store.max_physical_offset),
            _clients_family(broker),
            GaugeMetricFamily("graymq_broker_long_polls", "Pull requests waiting for messages.", broker.holds.waiting),
            *_connection_families(broker.stats),
            CounterMetricFamily("graymq_broker_refused_requests_total",
                                "Requests answered UNAUTHORIZED or FORBIDDEN.", broker.access.refused),
            *_damage_families(broker.store.stats),
            *_replication_families(broker),
        ]


def _traffic_families(stats: BrokerStats) -> list[Metric]:
    """Messages and bytes stored and pulled, by topic and side (``gray``, and ``lane``: the lane of the queue), with
    their recent rates."""
    side = ["topic", "gray", "lane"]
    put_msgs = CounterMetricFamily("graymq_broker_put_messages_total", "Messages stored, by topic and side.",
                                   labels=side)
    put_bytes = CounterMetricFamily("graymq_broker_put_bytes_total", "Bytes stored, by topic and side.",
                                    labels=side)
    put_rate = GaugeMetricFamily("graymq_broker_put_rate", "Messages stored per second over the last 10 s.",
                                 labels=side)
    get_msgs = CounterMetricFamily("graymq_broker_get_messages_total", "Messages pulled, by topic and side.",
                                   labels=side)
    get_rate = GaugeMetricFamily("graymq_broker_get_rate", "Messages pulled per second over the last 10 s.",
                                 labels=side)
    for (topic, lane), n in stats.put_msgs.items():
        put_msgs.add_metric([topic, *_side(lane)], n)
    for (topic, lane), n in stats.put_bytes.items():
        put_bytes.add_metric([topic, *_side(lane)], n)
    for (topic, lane), meter in stats.put_rate.items():
        put_rate.add_metric([topic, *_side(lane)], meter.rate())
    for (topic, lane), n in stats.get_msgs.items():
        get_msgs.add_metric([topic, *_side(lane)], n)
    for (topic, lane), meter in stats.get_rate.items():
        get_rate.add_metric([topic, *_side(lane)], meter.rate())
    return [put_msgs, put_bytes, put_rate, get_msgs, get_rate]


def _backlog_family(broker: BrokerController) -> Metric:
    backlog = GaugeMetricFamily("graymq_broker_consumer_backlog",
                                "max offset - committed offset per group and queue; gray: in a lane slot, lane: the "
                                "lane holding it (base: none), side: the side consuming it (gray also for a queue "
                                "the group's weight gives it).",
                                labels=["group", "topic", "queue", "gray", "lane", "side"])
    for group, topic, queue_id, offset in broker.offsets.items():
        config = broker.topics.get(topic)
        if config is None or queue_id >= config.queue_nums:
            continue
        behind = max(0, broker.store.get_max_offset(topic, queue_id) - offset)
        info = broker.consumers.groups.get(group)
        lane = config.lane_of(queue_id)
        weighted = info is not None and queue_id in info.weighted_queues(config)
        backlog.add_metric([group, topic, str(queue_id), *_side(lane),
                            "gray" if lane is not None or weighted else "normal"], behind)
    return backlog


def _clients_family(broker: BrokerController) -> Metric:
    clients = GaugeMetricFamily("graymq_broker_clients", "Consumer clients online, by group, flag and lane (base: "
                                "none).", labels=["group", "gray", "lane"])
    for group, info in broker.consumers.groups.items():
        counts = {BASE_LANE: 0, GRAY_LANE: 0}
        for c in info.clients.values():
            lane = (c.lane or GRAY_LANE) if c.gray_flag else BASE_LANE
            counts[lane] = counts.get(lane, 0) + 1
        for lane, count in counts.items():
            clients.add_metric([group, _flag(lane != BASE_LANE), lane], count)
    return clients


def _flush_families(store: StoreStats) -> list[Metric]:
    return [
        CounterMetricFamily("graymq_broker_flush_total", "Commit log flushes (fsync).", store.flush_count),
        CounterMetricFamily("graymq_broker_flush_seconds_total", "Time spent flushing the commit log.",
                            store.flush_seconds_total),
        GaugeMetricFamily("graymq_broker_last_flush_ms", "Latency of the last flush.", store.last_flush_ms),
    ]


def _connection_families(stats: BrokerStats) -> list[Metric]:
    unauthenticated = CounterMetricFamily(
        "graymq_broker_unauthenticated_closed_total", "Connections closed before they authenticated: refused "
        "over the unauthenticated budget, or past the authentication deadline.", labels=["reason"])
    unauthenticated.add_metric(["over_budget"], stats.unauthenticated_refused)
    unauthenticated.add_metric(["auth_timeout"], stats.unauthenticated_timed_out)
    grpc_refused = CounterMetricFamily("graymq_broker_grpc_over_budget_total", "gRPC calls and streams refused "
                                       "TOO_MANY_REQUESTS over a budget of their principal or connection.",
                                       labels=["budget"])
    for budget in Budget:
        grpc_refused.add_metric([budget.value], stats.grpc_refused[budget.value])
    grpc_malformed = CounterMetricFamily("graymq_broker_grpc_malformed_requests_total", "gRPC requests that were "
                                         "not their method's protobuf, refused before authentication.",
                                         labels=["method"])
    for method, count in sorted(stats.grpc_malformed.items()):
        grpc_malformed.add_metric([method], count)
    return [
        grpc_refused,
        grpc_malformed,
        CounterMetricFamily("graymq_broker_rejected_connections_total",
                            "Connections closed for protocol errors or over the connection limit.",
                            stats.connections_rejected),
        CounterMetricFamily("graymq_broker_grpc_rejected_connections_total",
                            "Connections to the gRPC port closed at once over its connection limit.",
                            stats.grpc_connections_rejected),
        CounterMetricFamily("graymq_broker_tls_handshake_failures_total",
                            "TLS handshakes on the broker port that failed or that the client left.",
                            stats.tls_handshake_failures),
        unauthenticated,
    ]


def _damage_families(store: StoreStats) -> list[Metric]:
    """What recovery and reads found damaged, and what is acked but not yet fsynced."""
    return [
        CounterMetricFamily("graymq_store_damaged_records_total",
                            "Damaged records found by recovery or reads (each lost, counted once).",
                            store.damaged_records),
        CounterMetricFamily("graymq_store_damaged_bytes_total", "Bytes of those damaged records.",
                            store.damaged_bytes),
        CounterMetricFamily("graymq_store_bad_units_total",
                            "Consume-queue units pointing at no record of theirs (made holes).",
                            store.bad_units),
        GaugeMetricFamily("graymq_store_unflushed_bytes",
                          "Acked bytes not yet fsynced (lost if the OS crashes or power fails).",
                          store.unflushed_bytes),
        GaugeMetricFamily("graymq_store_unflushed_age_seconds", "Age of the oldest unflushed write.",
                          store.unflushed_age_s()),
    ]


def _replication_families(broker: BrokerController) -> list[Metric]:
    """A broker set's view from this replica: its role and epoch, who is in sync, each follower's lag (on the
    leader) or its own (on a follower), and the bytes moved aside when it was deposed. None without replicas."""
    role = broker.role
    if not role.replicated:
        return []
    lag = GaugeMetricFamily("graymq_broker_replica_lag_bytes", "Bytes a replica is behind the leader's log end "
                            "(the leader reports each follower, a follower itself).", labels=["replica"])
    if role.leads:
        for replica, behind in sorted(broker.feed.lag().items()):
            lag.add_metric([str(replica)], behind)
    else:
        lag.add_metric([str(role.replica_id)], max(0, broker.fetcher.leader_end - broker.store.max_physical_offset))
    return [
        GaugeMetricFamily("graymq_broker_replica_leader", "1 while this replica leads its broker set.",
                          1 if role.leads else 0),
        GaugeMetricFamily("graymq_broker_replica_epoch", "The broker set's epoch as this replica knows it.",
                          role.epoch),
        GaugeMetricFamily("graymq_broker_replica_in_sync", "Replicas of the set in sync (as the name server "
                          "confirmed them).", len(role.in_sync)),
        GaugeMetricFamily("graymq_broker_replica_out_of_sync", "Replicas of the set the name server lists as not in "
                          "sync (sync sends are not waiting for them).", len(role.out_of_sync)),
        lag,
        CounterMetricFamily("graymq_broker_moved_aside_bytes", "Bytes this replica held past a new leader's log "
                            "when it was deposed, moved aside (STORE/moved-aside).", role.moved_aside_bytes),
    ]


def broker_registry(broker: BrokerController, loop: asyncio.AbstractEventLoop) -> CollectorRegistry:
    """A registry of this broker's families plus the process, platform and GC collectors (what
    ``prometheus_client``'s default registry holds), not shared with anything else in the process."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(broker, loop))
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry


class MetricsServer:
    """``prometheus_client``'s HTTP server (a daemon thread) for one broker's registry."""

    def __init__(self, broker: BrokerController) -> None:
        self._broker = broker
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    async def start(self, host: str, port: int) -> str:
        """Bind and serve; returns ``host:port`` as bound (``port`` 0 picks a free one)."""
        registry = broker_registry(self._broker, asyncio.get_running_loop())
        server, self._thread = await asyncio.to_thread(start_http_server, port, host, registry)
        self._server = server
        bound_host, bound_port = server.server_address[:2]
        return f"{bound_host!s}:{bound_port}"

    async def stop(self) -> None:
        """Stop accepting scrapes and close the listening socket."""
        if self._server is None or self._thread is None:
            return
        await asyncio.to_thread(self._server.shutdown)
        self._server.server_close()
        await asyncio.to_thread(self._thread.join)
