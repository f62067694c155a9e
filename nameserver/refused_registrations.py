"""Registrations the name server refused (a broker token bound to other broker names, a replica id not covered),
remembered per broker name and replica id so the people who meet the broker's absence hear why: ``graymq topic
route`` and a producer's "no live broker serves topic" error carry the refusal, not only the broker's own log.

In memory, per name server process (a broker registers with each of them): a refusal is kept while its broker
keeps trying (a broker's lease, from the interval it reports), forgotten once that broker (that replica of it)
registers: a set whose leader registers still shows the replica refused beside it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime

from graymq.nameserver.clock import utc_now
from graymq.nameserver.schemas import RefusedRegistration

MAX_KEPT = 256  # brokers (replicas) remembered at most (the oldest refusal goes first)
_Key = tuple[str, int]  # broker name, replica id (-1: none)


class RefusedRegistrations:
    """(broker name, replica id) -> its last refused registration; thread-safe (sync routes run in a thread
    pool)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, now: Callable[[], datetime] = utc_now) -> None:
        self._clock = clock
        self._now = now
        self._refused: dict[_Key, tuple[float, RefusedRegistration]] = {}  # -> (expires, monotonic; refusal)
        self._lock = threading.Lock()

    def refused(self, broker_name: str, replica_id: int | None, reason: str, keep_s: float) -> None:
        """Remember that ``broker_name`` (replica ``replica_id``) was refused for ``reason``, for ``keep_s``."""
        refusal = RefusedRegistration(broker_name=broker_name, replica_id=replica_id, reason=reason,
                                      refused_at=self._now())
        key = _key(broker_name, replica_id)
        with self._lock:
            self._refused.pop(key, None)
            self._refused[key] = (self._clock() + keep_s, refusal)
            while len(self._refused) > MAX_KEPT:
                del self._refused[next(iter(self._refused))]

    def registered(self, broker_name: str, replica_id: int | None) -> None:
        """This broker (replica) registered: its refusal is history."""
        key = _key(broker_name, replica_id)
        if key in self._refused:
            with self._lock:
                self._refused.pop(key, None)

    def current(self) -> list[RefusedRegistration]:
        """The refusals whose broker may still be trying, by broker name."""
        if not self._refused:
            return []
        now = self._clock()
        with self._lock:
            for key in [k for k, (expires, _) in self._refused.items() if expires <= now]:
                del self._refused[key]
            return [refusal for _, (_, refusal) in sorted(self._refused.items())]


def _key(broker_name: str, replica_id: int | None) -> _Key:
    return broker_name, -1 if replica_id is None else replica_id


def refusal_text(refusals: list[RefusedRegistration]) -> str:
    """The refusals in one line, as a "no live broker" error's detail says them."""
    return "; ".join(f"{r.reason} (refused at {r.refused_at:%H:%M:%S} UTC)" for r in refusals)
