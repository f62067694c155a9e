"""Queue allocation strategies for clustering consumers (pure functions of their inputs, no network).

Every client of a group runs the same strategy on the same inputs (sorted queues, sorted
clients), so they agree on who consumes what without talking to each other.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from graymq.core.message_queue import MessageQueue
from graymq.core.queue_layout import GRAY_LANE
from graymq.core.route import FREE_SLOT
from graymq.protocol.errors import ConfigError
from graymq.protocol.membership import ORPHAN_POLICIES, OrphanPolicy


@dataclass(frozen=True, order=True, slots=True)
class ConsumerView:
    """A member of the group as the rebalance sees it: its id, effective gray flag and the lane it names."""

    client_id: str
    gray: bool = False
    lane: str | None = None  # with ``gray``: its lane (None: ``gray``)

    @property
    def in_lane(self) -> str | None:
        """The lane this consumer is in; None for base."""
        return (self.lane or GRAY_LANE) if self.gray else None


class AllocateMessageQueueStrategy(Protocol):
    def allocate(
        self, group: str, client_id: str, queues: Sequence[MessageQueue], clients: Sequence[ConsumerView]
    ) -> list[MessageQueue]: ...


def _order(view: ConsumerView) -> tuple[str, bool, str]:
    return view.client_id, view.gray, view.lane or ""


def _check(client_id: str, clients: Sequence[ConsumerView]) -> list[ConsumerView]:
    """The clients sorted (the dataclass order, by a key: a group of hundreds sorts in C, not in ``__lt__``),
    or none when ``client_id`` is not among them."""
    ordered = sorted(set(clients), key=_order)
    if not any(c.client_id == client_id for c in ordered):
        return []
    return ordered


def _position(client_id: str, queues: Sequence[MessageQueue], clients: Sequence[ConsumerView]
              ) -> tuple[list[MessageQueue], int, int] | None:
    """(sorted queues, this client's index, client count), or None when there is nothing to split."""
    ordered = _check(client_id, clients)
    if not ordered or not queues:
        return None
    return sorted(queues), [c.client_id for c in ordered].index(client_id), len(ordered)


def _first_positions(clients: Sequence[ConsumerView]) -> dict[str, int]:
    """Each client's index in the sorted clients (a client listed twice: its first entry's, as ``_position``)."""
    positions: dict[str, int] = {}
    for index, c in enumerate(sorted(set(clients), key=_order)):
        positions.setdefault(c.client_id, index)
    return positions


def allocate_all(strategy: AllocateMessageQueueStrategy, group: str, queues: Sequence[MessageQueue],
                 clients: Sequence[ConsumerView]) -> dict[str, list[MessageQueue]]:
    """client id -> what ``strategy.allocate`` gives it, for every client of ``clients``: in one pass when the
    strategy has an ``allocate_all`` of its own, else client by client (a strategy given by the user)."""
    of_all = getattr(strategy, "allocate_all", None)
    if of_all is not None:
        return of_all(group, queues, clients)  # type: ignore[no-any-return]
    return {client_id: strategy.allocate(group, client_id, queues, clients)
            for client_id in {c.client_id for c in clients}}


class AllocateMessageQueueAveragely:
    """Contiguous blocks, the first ``len(queues) % len(clients)`` clients take one extra.

    Example: queues q0..q4, clients a, b → a: q0 q1 q2, b: q3 q4.
    """

    def allocate(
        self, group: str, client_id: str, queues: Sequence[MessageQueue], clients: Sequence[ConsumerView]
    ) -> list[MessageQueue]:
        position = _position(client_id, queues, clients)
        if position is None:
            return []
        mqs, index, k = position
        return self._block(mqs, index, k)

    def allocate_all(self, group: str, queues: Sequence[MessageQueue], clients: Sequence[ConsumerView]
                     ) -> dict[str, list[MessageQueue]]:
        """Every client's ``allocate``, in one pass."""
        positions, mqs = _first_positions(clients), sorted(queues)
        k = len(set(clients))
        return {client_id: self._block(mqs, index, k) for client_id, index in positions.items()}

    @staticmethod
    def _block(mqs: list[MessageQueue], index: int, k: int) -> list[MessageQueue]:
        n = len(mqs)
        size = n // k + (1 if index < n % k else 0)
        start = index * (n // k) + min(index, n % k)
        return mqs[start : start + size]


class AllocateMessageQueueAveragelyByCircle:
    """Round robin: queue i goes to client ``i % len(clients)``.

    Example: queues q0..q4, clients a, b → a: q0 q2 q4, b: q1 q3.
    """

    def allocate(
        self, group: str, client_id: str, queues: Sequence[MessageQueue], clients: Sequence[ConsumerView]
    ) -> list[MessageQueue]:
        position = _position(client_id, queues, clients)
        if position is None:
            return []
        mqs, index, k = position
        return mqs[index::k]

    def allocate_all(self, group: str, queues: Sequence[MessageQueue], clients: Sequence[ConsumerView]
                     ) -> dict[str, list[MessageQueue]]:
        """Every client's ``allocate``, in one pass."""
        positions, mqs = _first_positions(clients), sorted(queues)
        k = len(set(clients))
        return {client_id: mqs[index::k] for client_id, index in positions.items()}


class AllocateMessageQueueGray:
    """Each lane's queues to that lane's clients, base queues to base clients, each side split by ``base``.

    ``lane_of`` says which lane holds a queue (None: a base queue; ``FREE_SLOT``: a slot no lane holds, which
    nobody consumes); without it, ``is_gray`` queues are the ``gray`` lane's. With ``gray_switch`` off every queue is
    base and every client takes part. A lane with no client in the group is an orphan: by its policy
    (``lane_policies``; the ``gray`` lane's default is ``orphan_policy``, another's ``hold``) its queues wait for a
    client of the lane (``hold``) or go to the base clients (``adopt``). Weights hand a lane with at least one
    client in the group the base queues ``weighted_lane`` names for it (a consumer-only canary; without
    ``weighted_lane``, those ``is_weighted`` names go to the ``gray`` lane); a lane without a client leaves its
    share to the base clients. Each side's queues, whatever their kind, are split in one go, so the totals of a
    side's clients differ by at most one.

    Example (TOPIC_V_ORDER, 6 queues, 2 gray → 0 and 5; v1a v1b normal, v2a v2b gray):
    v2a → q0, v2b → q5, v1a → q1 q2, v1b → q3 q4.
    """

    def __init__(
        self,
        is_gray: Callable[[MessageQueue], bool],
        base: AllocateMessageQueueStrategy | None = None,
        *,
        orphan_policy: OrphanPolicy = "hold",
        gray_switch: bool = True,
        is_weighted: Callable[[MessageQueue], bool] = lambda mq: False,
        lane_of: Callable[[MessageQueue], str | None] | None = None,
        lane_policies: Mapping[str, OrphanPolicy] | None = None,
        weighted_lane: Callable[[MessageQueue], str | None] | None = None,
    ) -> None:
        for policy in (orphan_policy, *(lane_policies or {}).values()):
            if policy not in ORPHAN_POLICIES:
                raise ConfigError(f"orphan_policy must be 'hold' or 'adopt', got {policy!r}")
        self.is_gray = is_gray
        self.lane_of = lane_of or (lambda mq: GRAY_LANE if is_gray(mq) else None)
        self.weighted_lane = weighted_lane or (lambda mq: GRAY_LANE if is_weighted(mq) else None)
        self.base = base or AllocateMessageQueueAveragely()
        self.orphan_policy: OrphanPolicy = orphan_policy
        self.lane_policies = dict(lane_policies or {})
        self.gray_switch = gray_switch

    def policy(self, lane: str) -> OrphanPolicy:
        """What the group does with ``lane``'s queues while no client of the lane is in it."""
        return self.lane_policies.get(lane) or (self.orphan_policy if lane == GRAY_LANE else "hold")

    def lane_sides(self, queues: Sequence[MessageQueue], lanes_present: Collection[str]
                   ) -> dict[str | None, list[MessageQueue]]:
        """Each side's queues, sorted: None the base side, else each lane of ``lanes_present`` (lanes with a client
        in the group)."""
        base: list[MessageQueue] = []
        by_lane: dict[str, list[MessageQueue]] = {}
        for mq in sorted(queues):
            lane = self.lane_of(mq)
            if lane is None:
                base.append(mq)
            elif lane != FREE_SLOT:
                by_lane.setdefault(lane, []).append(mq)
        sides: dict[str | None, list[MessageQueue]] = {lane: [] for lane in lanes_present}
        adopted: list[MessageQueue] = []
        for lane, lane_queues in by_lane.items():
            if lane in sides:
                sides[lane] = lane_queues
            elif self.policy(lane) == "adopt":
                adopted += lane_queues
        kept: list[MessageQueue] = []
        for mq in base:
            lane = self.weighted_lane(mq)
            (sides[lane] if lane is not None and lane in sides else kept).append(mq)
        sides = {side: sorted(side_queues) for side, side_queues in sides.items()}
        sides[None] = sorted(kept + adopted)
        return sides

    def sides(self, queues: Sequence[MessageQueue], has_gray_clients: bool
              ) -> tuple[list[MessageQueue], list[MessageQueue]]:
        """(the ``gray`` lane's queues, the base side's), sorted: the two sides of a group without other lanes."""
        sides = self.lane_sides(queues, (GRAY_LANE,) if has_gray_clients else ())
        return sides.get(GRAY_LANE, []), sides[None]

    def allocate(
        self, group: str, client_id: str, queues: Sequence[MessageQueue], clients: Sequence[ConsumerView]
    ) -> list[MessageQueue]:
        ordered = _check(client_id, clients)
        if not ordered:
            return []
        if not self.gray_switch:
            return self.base.allocate(group, client_id, queues, [ConsumerView(c.client_id) for c in ordered])
        sides = self.lane_sides(queues, {side for c in ordered if (side := c.in_lane) is not None})
        lane = next(c for c in ordered if c.client_id == client_id).in_lane
        return self.base.allocate(group, client_id, sides.get(lane, []), [c for c in ordered if c.in_lane == lane])

    def allocate_all(self, group: str, queues: Sequence[MessageQueue], clients: Sequence[ConsumerView]
                     ) -> dict[str, list[MessageQueue]]:
        """Every client's ``allocate`` in one pass: the sides are worked out once, each split once by ``base``."""
        ordered = sorted(set(clients), key=_order)
        if not self.gray_switch:
            return allocate_all(self.base, group, queues, [ConsumerView(c.client_id) for c in ordered])
        by_lane: dict[str | None, list[ConsumerView]] = {}
        lane_of_client: dict[str, str | None] = {}
        for c in ordered:
            by_lane.setdefault(c.in_lane, []).append(c)
            lane_of_client.setdefault(c.client_id, c.in_lane)
        sides = self.lane_sides(queues, {lane for lane in by_lane if lane is not None})
        shares = {lane: allocate_all(self.base, group, sides.get(lane, []), side_clients)
                  for lane, side_clients in by_lane.items()}
        return {client_id: shares[lane][client_id] for client_id, lane in lane_of_client.items()}

    def adopted(self, mq: MessageQueue) -> bool:
        """Whether a base client holding ``mq`` holds it by adoption (the pull must say so)."""
        return self.gray_switch and self.lane_of(mq) is not None


STRATEGIES: dict[str, type] = {
    "averagely": AllocateMessageQueueAveragely,
    "circle": AllocateMessageQueueAveragelyByCircle,
}
