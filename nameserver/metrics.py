"""The name server's Prometheus metrics (``prometheus_client``): request counters, database errors,
open watches, and live-object gauges.

Counters are per process (as Prometheus expects, one series set per replica); the gauges are read from the
database at scrape time so every replica reports the same cluster state. Each app owns its registry, so
several apps in one process (tests) never share or collide on a series.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

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
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

PREFIX = "graymq_nameserver"

# No ``*_created`` series: a classic-text scrape stores each as one more gauge series per label set.
disable_created_metrics()


class _ClusterGauges(Collector):
    """Live brokers and clients as read for one scrape; a ``None`` reading is left out."""

    def __init__(self, live_brokers: int | None, live_clients: Iterable[tuple[str, str, bool, int]] | None) -> None:
        self._live_brokers = live_brokers
        self._live_clients = live_clients

    def collect(self) -> Iterator[Metric]:
        if self._live_brokers is not None:
            yield GaugeMetricFamily(f"{PREFIX}_live_brokers", "Brokers whose lease has not expired.",
                                    self._live_brokers)
        if self._live_clients is not None:
            clients = GaugeMetricFamily(f"{PREFIX}_live_clients",
                                        "Clients seen recently, by group, role and reported gray flag.",
                                        labels=["group", "role", "gray"])
            for group, role, gray, count in sorted(self._live_clients):
                clients.add_metric([group, role, str(gray).lower()], count)
            yield clients


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
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)

    def request(self, method: str, route: str, status: int) -> None:
        self._requests.labels(method, route, str(status)).inc()

    def db_error(self) -> None:
        self._db_errors.inc()

    def watching(self, delta: int) -> None:
        """A client watch opened (+1) or answered (-1)."""
        self._open_watches.inc(delta)

    def render(
        self,
        live_brokers: int | None,
        live_clients: Iterable[tuple[str, str, bool, int]] | None,
    ) -> str:
        """The exposition text (``generate_latest``, text format 0.0.4) of the registry and the cluster gauges;
        a gauge is left out when the database could not be read (``None``)."""
        cluster = _ClusterGauges(live_brokers, live_clients)
        return (generate_latest(self.registry) + generate_latest(cluster)).decode()
