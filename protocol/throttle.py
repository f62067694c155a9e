"""Failed-authentication throttling: an address that failed too often lately is refused for a while."""

from __future__ import annotations

import math
import threading
import time
from collections import deque


class FailedAuthThrottle:
    """At most ``limit`` failed authentications per address in any ``window_s`` seconds.

    ``retry_after(address)`` is ``None`` while the address may try, else the seconds until its
    oldest counted failure leaves the window. A failure may name the token that failed (its digest):
    the same wrong token again within the window is not counted again, so a misconfigured peer retrying
    its one token does not lock out the other clients of its address, while guessing (a new token each
    time) is throttled as before. Memory is bounded: at most ``max_addresses`` are tracked (the least
    recently failing are forgotten first).

    >>> throttle = FailedAuthThrottle(limit=2, window_s=60)
    >>> for _ in range(5):
    ...     throttle.failed("10.0.0.1", "digest-of-a-stale-token")
    >>> throttle.retry_after("10.0.0.1") is None
    True
    >>> throttle.failed("10.0.0.1", "another-guess")
    >>> throttle.retry_after("10.0.0.1") is not None
    True
    """

    def __init__(self, limit: int, window_s: float, max_addresses: int = 10_000) -> None:
        self.limit = limit
        self.window_s = window_s
        self.max_addresses = max_addresses
        self._failures: dict[str, deque[tuple[float, str | None]]] = {}  # address -> (when, token digest)
        self._lock = threading.Lock()

    def _recent(self, address: str, now: float) -> deque[tuple[float, str | None]] | None:
        failures = self._failures.get(address)
        while failures and failures[0][0] <= now - self.window_s:
            failures.popleft()
        return failures

    def retry_after(self, address: str) -> int | None:
        now = time.monotonic()
        with self._lock:
            failures = self._recent(address, now)
            if failures is None or len(failures) < self.limit:
                return None
            return max(1, math.ceil(failures[0][0] + self.window_s - now))

    def failed_before(self, address: str, token: str) -> bool:
        """Whether ``address`` failed with ``token`` within the window."""
        with self._lock:
            failures = self._recent(address, time.monotonic())
            return failures is not None and any(t == token for _, t in failures)

    def failed(self, address: str, token: str | None = None) -> None:
        """Count a failure of ``address``; ``token`` (a digest of what it sent, ``None``: nothing sent) is counted
        once per window."""
        now = time.monotonic()
        with self._lock:
            failures = self._recent(address, now)
            if failures is not None and token is not None and any(t == token for _, t in failures):
                return
            if failures is None:
                if len(self._failures) >= self.max_addresses:
                    del self._failures[next(iter(self._failures))]
                failures = self._failures[address] = deque(maxlen=self.limit)
            else:
                self._failures[address] = self._failures.pop(address)  # most recent last
            failures.append((now, token))
