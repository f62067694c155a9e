"""GroupGray: a consumer group's gray settings as the name server last answered them, read by every side that
decides which queues a client may take (the client's rebalancer, the broker's gRPC consumers)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from graymq.core.queue_layout import GRAY_LANE
from graymq.protocol.membership import OrphanPolicy


@dataclass
class GroupGray:
    """The group's gray settings, as the name server last answered."""

    switch: bool = True
    weight: int = 0  # percent of the normal queues the group's gray side consumes
    orphan_policy: OrphanPolicy = "hold"
    retired: bool = False  # the group's gray side is rolled back
    lane_policies: dict[str, OrphanPolicy] = field(default_factory=dict)  # each lane's orphan policy in the group
    lane_weights: dict[str, int] = field(default_factory=dict)  # each other lane's weight (``weight`` is gray's)

    @property
    def weights(self) -> tuple[tuple[str, int], ...]:
        """Every weighted lane's (lane, percent), ``gray``'s from ``weight``, sorted: what
        ``core.queue_layout.lane_weight_shares`` takes."""
        weights = {lane: w for lane, w in self.lane_weights.items() if w and lane != GRAY_LANE}
        if self.weight:
            weights[GRAY_LANE] = self.weight
        return tuple(sorted(weights.items()))

    @staticmethod
    def lane_weights_of(lanes: Any) -> dict[str, int]:
        """The weight of each lane but ``gray`` from a name server answer's ``lanes`` ({lane: {"weight": ...}}),
        those above 0; anything else reads as none.

        >>> GroupGray.lane_weights_of({"v3": {"weight": 20}, "v2": {"orphan_policy": "hold"}, "gray": {"weight": 5}})
        {'v3': 20}
        """
        if not isinstance(lanes, dict):
            return {}
        return {str(lane): info["weight"] for lane, info in lanes.items()
                if lane != GRAY_LANE and isinstance(info, dict) and isinstance(info.get("weight"), int)
                and 0 < info["weight"] <= 100}

    @staticmethod
    def policies(lanes: Any) -> dict[str, OrphanPolicy]:
        """The orphan policy of each lane from a name server answer's ``lanes`` ({lane: {"orphan_policy": ...}});
        anything else reads as none known."""
        if not isinstance(lanes, dict):
            return {}
        return {str(lane): info["orphan_policy"] for lane, info in lanes.items()
                if isinstance(info, dict) and info.get("orphan_policy") in ("hold", "adopt")}
