"""Queue allocation strategies for clustering consumers (pure functions of their inputs, no network).

Every client of a group runs the same strategy on the same inputs (sorted queues, sorted
clients), so they agree on who consumes what without talking to each other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from graymq.core.message_queue import MessageQueue
from graymq.protocol.errors import ConfigError
from graymq.protocol.membership import ORPHAN_POLICIES, OrphanPolicy


@dataclass(frozen=True, order=True, slots=True)
class ConsumerView:
    """A member of the group as the rebalance sees it: its id and effective gray flag."""

    client_id: str
    gray: bool = False


class AllocateMessageQueueStrategy(Protocol):
    def allocate(
        self, group: str, client_id: str, queues: Sequence[MessageQueue], clients: Sequence[ConsumerView]
    ) -> list[MessageQueue]: ...


def _order(view: ConsumerView) -> tuple[str, bool]:
    return view.client_id, view.gray


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
        return [mq for i, mq in enumerate(mqs) if i % k == index]


class AllocateMessageQueueGray:
    """Gray queues to gray clients, normal queues to normal clients, each side split by ``base``.

    ``is_gray`` says whether a queue is gray (from the topic route's gray layout). With
    ``gray_switch`` off every queue is normal and every client takes part. When the group has
    no gray client, the gray queues are orphans: ``hold`` leaves them unconsumed (gray messages
    wait for a gray consumer), ``adopt`` hands them to the normal clients. With a ``weight`` and at
    least one gray client, the normal queues ``is_weighted`` names go to the gray side too (a
    consumer-only canary). Each side's queues, whatever their kind, are split in one go, so the
    totals of the clients of a side differ by at most one queue.

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
    ) -> None:
        if orphan_policy not in ORPHAN_POLICIES:
            raise ConfigError(f"orphan_policy must be 'hold' or 'adopt', got {orphan_policy!r}")
        self.is_gray = is_gray
        self.is_weighted = is_weighted
        self.base = base or AllocateMessageQueueAveragely()
        self.orphan_policy: OrphanPolicy = orphan_policy
        self.gray_switch = gray_switch

    def sides(self, queues: Sequence[MessageQueue], has_gray_clients: bool
              ) -> tuple[list[MessageQueue], list[MessageQueue]]:
        """(the gray side's queues, the normal side's), sorted."""
        gray: list[MessageQueue] = []
        normal: list[MessageQueue] = []
        for mq in sorted(queues):
            (gray if self.is_gray(mq) else normal).append(mq)
        if not has_gray_clients:
            return [], normal + (gray if self.orphan_policy == "adopt" else [])
        weighted = [mq for mq in normal if self.is_weighted(mq)]
        return sorted(gray + weighted), [mq for mq in normal if mq not in weighted]

    def allocate(
        self, group: str, client_id: str, queues: Sequence[MessageQueue], clients: Sequence[ConsumerView]
    ) -> list[MessageQueue]:
        ordered = _check(client_id, clients)
        if not ordered:
            return []
        if not self.gray_switch:
            return self.base.allocate(group, client_id, queues, [ConsumerView(c.client_id) for c in ordered])
        me = next(c for c in ordered if c.client_id == client_id)
        gray_clients = [c for c in ordered if c.gray]
        gray_side, normal_side = self.sides(queues, bool(gray_clients))
        if me.gray:
            return self.base.allocate(group, client_id, gray_side, gray_clients)
        return self.base.allocate(group, client_id, normal_side, [c for c in ordered if not c.gray])

    def adopted(self, mq: MessageQueue) -> bool:
        """Whether a normal client holding ``mq`` holds it by adoption (the pull must say so)."""
        return self.gray_switch and self.is_gray(mq)


STRATEGIES: dict[str, type] = {
    "averagely": AllocateMessageQueueAveragely,
    "circle": AllocateMessageQueueAveragelyByCircle,
}
