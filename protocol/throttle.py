"""Failed-authentication throttling: an address that failed too often lately is refused for a while."""

from __future__ import annotations

import math
import threading
import time
from collections import deque


class FailedAuthThrottle:
    """At most ``limit`` failed authentications per address in any ``window_s`` seconds.

    ``retry_after(address)`` is ``None`` while the address may try, else the seconds until its
    oldest counted failure leaves the window. Memory is bounded: at most ``max_addresses`` are
    tracked (the least recently failing are forgotten first).
    """

    def __init__(self, limit: int, window_s: float, max_addresses: int = 10_000) -> None:
        self.limit = limit
        self.window_s = window_s
        self.max_addresses = max_addresses
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, address: str, now: float) -> deque[float] | None:
        failures = self._failures.get(address)
        while failures and failures[0] <= now - self.window_s:
            failures.popleft()
        return failures

    def retry_after(self, address: str) -> int | None:
        now = time.monotonic()
        with self._lock:
            failures = self._recent(address, now)
            if failures is None or len(failures) < self.limit:
                return None
            return max(1, math.ceil(failures[0] + self.window_s - now))

    def failed(self, address: str) -> None:
        now = time.monotonic()
        with self._lock:
            failures = self._recent(address, now)
            if failures is None:
                if len(self._failures) >= self.max_addresses:
                    del self._failures[next(iter(self._failures))]
                failures = self._failures[address] = deque(maxlen=self.limit)
            else:
                self._failures[address] = self._failures.pop(address)  # most recent last
            failures.append(now)
