"""GroupGray: a consumer group's gray settings as the name server last answered them, read by every side that
decides which queues a client may take (the client's rebalancer, the broker's gRPC consumers)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from graymq.protocol.membership import OrphanPolicy


@dataclass
class GroupGray:
    """The group's gray settings, as the name server last answered."""

    switch: bool = True
    weight: int = 0  # percent of the normal queues the group's gray side consumes
    orphan_policy: OrphanPolicy = "hold"
    retired: bool = False  # the group's gray side is rolled back
    lane_policies: dict[str, OrphanPolicy] = field(default_factory=dict)  # each lane's orphan policy in the group

    @staticmethod
    def policies(lanes: Any) -> dict[str, OrphanPolicy]:
        """The orphan policy of each lane from a name server answer's ``lanes`` ({lane: {"orphan_policy": ...}});
        anything else reads as none known."""
        if not isinstance(lanes, dict):
            return {}
        return {str(lane): info["orphan_policy"] for lane, info in lanes.items()
                if isinstance(info, dict) and info.get("orphan_policy") in ("hold", "adopt")}
