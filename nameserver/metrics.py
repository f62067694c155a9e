"""The name server's Prometheus metrics (``prometheus_client``): request counters, database errors,
open watches, live-object gauges, and each group's release (gray switch, weight, cutover operations).

Counters are per process (as Prometheus expects, one series set per replica); the gauges are read from the
database at scrape time so every replica reports the same cluster state. Each app owns its registry, so
several apps in one process (tests) never share or collide on a series.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from graymq.nameserver.models import CUTOVER_KINDS, CUTOVER_STATES, RUNNING
from graymq.protocol.health import COUNTERS, GRAY
from graymq.protocol.names import BASE_LANE

PREFIX = "graymq_nameserver"

# No ``*_created`` series: a classic-text scrape stores each as one more gauge series per label set.
disable_created_metrics()


ConsumerHealth = Mapping[str, Mapping[str, Mapping[str, float]]]  # group -> lane (base too) -> figure -> value
LiveClients = Iterable[tuple[str, str, bool, str | None, int]]  # (group, role, gray, lane as stored, count)


@dataclass(frozen=True)
class GroupRelease:
    """A group's release as stored: its gray switch, its weight (percent) and its cutover operations (promote,
    rollback, rollout) counted by ``(kind, state)``."""

    group: str
    gray_switch: bool
    weight: int
    operations: Mapping[tuple[str, str], int]


class _ClusterGauges(Collector):
    """Live brokers and clients, and the consumers' health, as read for one scrape; a ``None`` reading is left out.

    Consumer figures are the live consumers' reports added up per group and lane (``protocol.health``): the
    message counters drop when a consumer leaves, which ``rate()`` takes for a counter reset. The ``lane`` label is
    ``base`` for what is in no lane, else the lane's name (``gray`` included); ``side`` stays ``gray``/``normal``.
    """

    def __init__(self, live_brokers: int | None, live_clients: LiveClients | None,
                 consumer_health: ConsumerHealth | None, group_releases: Iterable[GroupRelease] | None) -> None:
        self._live_brokers = live_brokers
        self._live_clients = live_clients
        self._consumer_health = consumer_health
        self._group_releases = group_releases

    def collect(self) -> Iterator[Metric]:
        if self._live_brokers is not None:
            yield GaugeMetricFamily(f"{PREFIX}_live_brokers", "Brokers whose lease has not expired.",
                                    self._live_brokers)
        if self._live_clients is not None:
            clients = GaugeMetricFamily(f"{PREFIX}_live_clients",
                                        "Clients seen recently, by group, role, reported gray flag and lane.",
                                        labels=["group", "role", "gray", "lane"])
            for group, role, gray, lane, count in sorted(self._live_clients, key=lambda row: (*row[:3], row[3] or "")):
                clients.add_metric([group, role, str(gray).lower(), (lane or GRAY) if gray else BASE_LANE], count)
            yield clients
        if self._consumer_health is not None:
            yield from _health_families(self._consumer_health)
        if self._group_releases is not None:
            yield from _release_families(self._group_releases)


def _health_families(health: ConsumerHealth) -> Iterator[Metric]:
    messages = CounterMetricFamily("graymq_consumer_messages", "Messages the group's live consumers handled, by "
                                   "side (gray: consumed as gray), lane (base: none) and outcome (consumed, failed, "
                                   "sent_back, dead_lettered).", labels=["group", "side", "lane", "outcome"])
    latency = GaugeMetricFamily("graymq_consumer_latency_ms", "Consume latency of the group's live consumers over "
                                "their recent window, the worst consumer's, by side, lane and quantile.",
                                labels=["group", "side", "lane", "quantile"])
    for group, lanes in sorted(health.items()):
        for lane, figures in sorted(lanes.items()):
            side = "normal" if lane == BASE_LANE else GRAY
            for outcome in COUNTERS:
                messages.add_metric([group, side, lane, outcome], figures[outcome])
            for quantile, name in (("0.5", "p50_ms"), ("0.99", "p99_ms")):
                latency.add_metric([group, side, lane, quantile], figures[name])
    yield messages
    yield latency


def _release_families(releases: Iterable[GroupRelease]) -> Iterator[Metric]:
    """Every group's switch and weight, and its operations: running ones by kind, finished ones by kind and
    outcome (every kind and state exposed, 0 included, so ``increase()`` sees the first one)."""
    switch = GaugeMetricFamily("graymq_group_gray_switch", "1 while the group's gray switch is on.", labels=["group"])
    weight = GaugeMetricFamily("graymq_group_gray_weight_percent", "Percent of each topic's normal queues the "
                               "group's gray consumers take (weighted canary).", labels=["group"])
    running = GaugeMetricFamily("graymq_group_operations_running", "The group's cutover operations running, by "
                                "kind (promote, rollback, rollout).", labels=["group", "kind"])
    finished = CounterMetricFamily("graymq_group_operations_finished", "The group's cutover operations recorded "
                                   "as finished, by kind and state (SUCCEEDED, FAILED, ABORTED).",
                                   labels=["group", "kind", "state"])
    for release in sorted(releases, key=lambda r: r.group):
        switch.add_metric([release.group], 1 if release.gray_switch else 0)
        weight.add_metric([release.group], release.weight)
        for kind in CUTOVER_KINDS:
            running.add_metric([release.group, kind], release.operations.get((kind, RUNNING), 0))
            for state in CUTOVER_STATES:
                if state != RUNNING:
                    finished.add_metric([release.group, kind, state], release.operations.get((kind, state), 0))
    yield from (switch, weight, running, finished)


class Metrics:
    """One name server app's counters and gauges, in a registry of its own (thread-safe)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._requests = Counter(f"{PREFIX}_http_requests_total", "HTTP requests by method, route template and status.",
                                 ["method", "route", "status"], registry=self.registry)
        self._db_errors = Counter(f"{PREFIX}_db_errors_total",
                                  "Requests that failed because the database was unavailable.", registry=self.registry)
        self._open_watches = Gauge(f"{PREFIX}_open_watches", "Client watches (long polls) waiting for a change.",
                                   registry=self.registry)
        self._beats = Counter(f"{PREFIX}_client_beats_total", "Client heartbeats in batches by kind: full (stored and "
                              "answered), alive (by key) or alive_id.", ["kind"], registry=self.registry)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)

    def request(self, method: str, route: str, status: int) -> None:
        self._requests.labels(method, route, str(status)).inc()

    def db_error(self) -> None:
        self._db_errors.inc()

    def beats(self, full: int, alive: int, alive_ids: int) -> None:
        """A batch of client heartbeats: how many of each kind it carried."""
        for kind, count in (("full", full), ("alive", alive), ("alive_id", alive_ids)):
            if count:
                self._beats.labels(kind).inc(count)

    def watching(self, delta: int) -> None:
        """A client watch opened (+1) or answered (-1)."""
        self._open_watches.inc(delta)

    def render(
        self,
        live_brokers: int | None,
        live_clients: LiveClients | None,
        consumer_health: ConsumerHealth | None = None,
        group_releases: Iterable[GroupRelease] | None = None,
    ) -> str:
        """The exposition text (``generate_latest``, text format 0.0.4) of the registry and the cluster gauges;
        a gauge is left out when the database could not be read (``None``)."""
        cluster = _ClusterGauges(live_brokers, live_clients, consumer_health, group_releases)
        return (generate_latest(self.registry) + generate_latest(cluster)).decode()
