"""What one principal, and one connection, may hold on the gRPC endpoint at once.

Every Telemetry stream, stock client id, name-server registration (a client in one group, heartbeated and
watched for it) and ReceiveMessage long poll costs the broker memory and the name server work for as long as it
is held. Without a bound, one principal with a produce right holding a thousand streams under as many client ids
takes the broker and its name server down for everyone. Each is therefore held under a budget per principal
(and, for streams and long polls, per connection: gRPC's peer address and port); one over its budget is refused
with RocketMQ's ``TOO_MANY_REQUESTS`` naming the budget and the setting that raises it, and counted by budget.
Budgets are checked and held in the caller's own accounts only: another principal is never slowed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum

from graymq.broker_ext.grpc_endpoint.status import RocketMQStatusError
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2


class Budget(StrEnum):
    """A budget's name: the metric's label, and the broker setting ``grpc_max_<name>`` that sets it."""

    STREAMS_PER_PRINCIPAL = "streams_per_principal"
    STREAMS_PER_CONNECTION = "streams_per_connection"
    CLIENT_IDS_PER_PRINCIPAL = "client_ids_per_principal"
    REGISTRATIONS_PER_PRINCIPAL = "registrations_per_principal"
    RECEIVES_PER_PRINCIPAL = "receives_per_principal"
    RECEIVES_PER_CONNECTION = "receives_per_connection"


@dataclass(frozen=True, slots=True)
class BudgetLimits:
    """The budgets' sizes. The defaults leave room for a fleet's services (a principal's pods each hold one stream
    per client and broker, one long poll per consumer and queue batch) and none for a flood from one of them."""

    streams_per_principal: int = 1024
    streams_per_connection: int = 64
    client_ids_per_principal: int = 256
    registrations_per_principal: int = 512
    receives_per_principal: int = 1024
    receives_per_connection: int = 256

    def of(self, budget: Budget) -> int:
        return int(getattr(self, budget.value))


Claim = tuple[Budget, str]  # (budget, its holder: a principal's name or a connection's peer)


class Budgets:
    """``take(*claims)`` holds one unit of each claim or none; ``give_back(*claims)`` returns them.

    >>> budgets = Budgets(BudgetLimits(streams_per_principal=1))
    >>> budgets.take((Budget.STREAMS_PER_PRINCIPAL, "orders"))
    >>> try:
    ...     budgets.take((Budget.STREAMS_PER_PRINCIPAL, "orders"))
    ... except RocketMQStatusError as refused:
    ...     print(refused.code == v2.TOO_MANY_REQUESTS, refused.message[:56])
    True over the gRPC budget streams_per_principal of orders (1)
    >>> budgets.take((Budget.STREAMS_PER_PRINCIPAL, "payments"))
    >>> budgets.refused[Budget.STREAMS_PER_PRINCIPAL]
    1
    """

    def __init__(self, limits: BudgetLimits, refused: Counter[str] | None = None) -> None:
        self.limits = limits
        self.refused: Counter[str] = Counter() if refused is None else refused  # budget -> refusals (a metric)
        self._held: Counter[Claim] = Counter()

    def held(self, budget: Budget, holder: str) -> int:
        return self._held[budget, holder]

    def take(self, *claims: Claim) -> None:
        """Hold one unit of every claim; ``TOO_MANY_REQUESTS`` (and nothing held) when one is over its budget."""
        for budget, holder in claims:
            limit = self.limits.of(budget)
            if self._held[budget, holder] >= limit:
                self.refused[budget] += 1
                raise RocketMQStatusError(
                    v2.TOO_MANY_REQUESTS, f"over the gRPC budget {budget} of {holder} ({limit}): close some first, "
                    f"or raise GRAYMQ_BROKER_GRPC_MAX_{budget.upper()}")
        for claim in claims:
            self._held[claim] += 1

    def give_back(self, *claims: Claim) -> None:
        for claim in claims:
            left = self._held[claim] - 1
            if left > 0:
                self._held[claim] = left
            else:
                self._held.pop(claim, None)  # no key left per gone principal or connection: memory returns

    @contextmanager
    def holding(self, *claims: Claim) -> Iterator[None]:
        """Hold the claims for the ``with`` block."""
        self.take(*claims)
        try:
            yield
        finally:
            self.give_back(*claims)
