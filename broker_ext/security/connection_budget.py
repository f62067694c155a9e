"""Connections that have not authenticated yet, held under a budget of their own.

A stranger's sockets cost nothing to open: left to the broker's overall connection limit, a burst of them from
one host fills it and every rightful client is refused. They get their own, smaller budget within that limit,
over every address and per address: a flood from one host leaves room for clients connecting from elsewhere,
and no flood of strangers can take the slots of authenticated connections.
"""

from __future__ import annotations

from collections import Counter

from graymq.protocol.connection import Connection


class UnauthenticatedBudget:
    """At most ``limit`` unauthenticated connections, ``per_address`` of them from one address.

    >>> budget = UnauthenticatedBudget(limit=3, per_address=2)
    >>> for conn in ("a", "b"):
    ...     budget.add(conn, "10.0.0.9")
    >>> budget.refusal("10.0.0.9"), budget.refusal("10.0.0.8")
    ('per_address', None)
    >>> budget.add("c", "10.0.0.8")
    >>> budget.refusal("10.0.0.7")
    'limit'
    >>> budget.release("a")
    >>> budget.refusal("10.0.0.9")
    """

    def __init__(self, limit: int, per_address: int) -> None:
        self.limit = limit
        self.per_address = per_address
        self._address: dict[Connection, str] = {}  # connection -> its peer's address, while unauthenticated
        self._per_address: Counter[str] = Counter()

    def refusal(self, address: str) -> str | None:
        """Which budget a new connection from ``address`` would exceed (``"per_address"``, ``"limit"``), if any."""
        if self._per_address[address] >= self.per_address:
            return "per_address"
        if len(self._address) >= self.limit:
            return "limit"
        return None

    def add(self, conn: Connection, address: str) -> None:
        """Count ``conn``, from ``address``, until it authenticates or closes."""
        self._address[conn] = address
        self._per_address[address] += 1

    def release(self, conn: Connection) -> None:
        """``conn`` authenticated or closed: it leaves the budget (a connection never counted is ignored)."""
        address = self._address.pop(conn, None)
        if address is None:
            return
        self._per_address[address] -= 1
        if not self._per_address[address]:
            del self._per_address[address]
