"""GroupGray: a consumer group's gray settings as the name server last answered them, read by every side that
decides which queues a client may take (the client's rebalancer, the broker's gRPC consumers)."""

from __future__ import annotations

from dataclasses import dataclass

from graymq.protocol.membership import OrphanPolicy


@dataclass
class GroupGray:
    """The group's gray settings, as the name server last answered."""

    switch: bool = True
    weight: int = 0  # percent of the normal queues the group's gray side consumes
    orphan_policy: OrphanPolicy = "hold"
    retired: bool = False  # the group's gray side is rolled back
