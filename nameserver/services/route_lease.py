"""A broker's lease on its routes: how long one registration keeps it routed."""

from __future__ import annotations

import math

from graymq.nameserver.settings import NameServerSettings


def broker_lease_s(settings: NameServerSettings, interval_s: float | None) -> int:
    """How long one registration keeps a broker routed: ``broker_lease_heartbeats`` of its registration intervals,
    at least ``broker_lease_min_seconds``, at most ``broker_lease_seconds`` (also the lease of a broker that does not
    report its interval).

    >>> s = NameServerSettings(broker_lease_seconds=120, broker_lease_heartbeats=4, broker_lease_min_seconds=6)
    >>> broker_lease_s(s, 3.0), broker_lease_s(s, 0.5), broker_lease_s(s, 60.0), broker_lease_s(s, None)
    (12, 6, 120, 120)
    """
    if interval_s is None:
        return settings.broker_lease_seconds
    wanted = max(settings.broker_lease_min_seconds, math.ceil(settings.broker_lease_heartbeats * interval_s))
    return min(settings.broker_lease_seconds, wanted)
