"""Prometheus text exposition, by hand: request counters, database errors and live-object gauges.

Counters are per process (as Prometheus expects, one series set per replica); the gauges are
read from the database at scrape time so every replica reports the same cluster state.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Mapping

PREFIX = "graymq_nameserver"


def escape_label(value: str) -> str:
    """A label value as the text format wants it: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(pairs: Mapping[str, str]) -> str:
    return "{" + ",".join(f'{key}="{escape_label(value)}"' for key, value in pairs.items()) + "}"


class Metrics:
    """Thread-safe counters of one name server process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: Counter[tuple[str, str, int]] = Counter()
        self._db_errors = 0
        self._open_watches = 0

    def request(self, method: str, route: str, status: int) -> None:
        with self._lock:
            self._requests[(method, route, status)] += 1

    def db_error(self) -> None:
        with self._lock:
            self._db_errors += 1

    def watching(self, delta: int) -> None:
        """A client watch opened (+1) or answered (-1)."""
        with self._lock:
            self._open_watches += delta

    def render(
        self,
        live_brokers: int | None,
        live_clients: Iterable[tuple[str, str, bool, int]] | None,
    ) -> str:
        """The exposition text; gauges are left out when the database could not be read."""
        with self._lock:
            requests = sorted(self._requests.items())
            db_errors = self._db_errors
            open_watches = self._open_watches
        lines = [
            f"# HELP {PREFIX}_http_requests_total HTTP requests by method, route template and status.",
            f"# TYPE {PREFIX}_http_requests_total counter",
        ]
        for (method, route, status), count in requests:
            labels = _labels({"method": method, "route": route, "status": str(status)})
            lines.append(f"{PREFIX}_http_requests_total{labels} {count}")
        lines += [
            f"# HELP {PREFIX}_db_errors_total Requests that failed because the database was unavailable.",
            f"# TYPE {PREFIX}_db_errors_total counter",
            f"{PREFIX}_db_errors_total {db_errors}",
            f"# HELP {PREFIX}_open_watches Client watches (long polls) waiting for a change.",
            f"# TYPE {PREFIX}_open_watches gauge",
            f"{PREFIX}_open_watches {open_watches}",
        ]
        if live_brokers is not None:
            lines += [
                f"# HELP {PREFIX}_live_brokers Brokers whose lease has not expired.",
                f"# TYPE {PREFIX}_live_brokers gauge",
                f"{PREFIX}_live_brokers {live_brokers}",
            ]
        if live_clients is not None:
            lines += [
                f"# HELP {PREFIX}_live_clients Clients seen recently, by group, role and reported gray flag.",
                f"# TYPE {PREFIX}_live_clients gauge",
            ]
            for group, role, gray, count in sorted(live_clients):
                labels = _labels({"group": group, "role": role, "gray": str(gray).lower()})
                lines.append(f"{PREFIX}_live_clients{labels} {count}")
        return "\n".join(lines) + "\n"
