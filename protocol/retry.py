"""Pacing for retries: jittered capped exponential backoff, and warnings that do not flood the log."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Hashable


class Backoff:
    """Capped exponential backoff with jitter.

    The n-th delay (n from 0) is drawn from ``[d/2, d]`` with ``d = min(cap_s, base_s * 2**n)``: it
    grows fast, never exceeds ``cap_s``, and consumers failing together do not retry in step.

    >>> b = Backoff(0.1, 1.0, rand=lambda: 1.0)
    >>> [b.next() for _ in range(6)]
    [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    >>> b.reset(); b.next()
    0.1
    """

    def __init__(self, base_s: float, cap_s: float, rand: Callable[[], float] = random.random) -> None:
        self.base_s = base_s
        self.cap_s = cap_s
        self.attempts = 0
        self._rand = rand

    def next(self) -> float:
        ceiling = min(self.cap_s, self.base_s * 2 ** min(self.attempts, 62))
        self.attempts += 1
        return ceiling / 2 + self._rand() * ceiling / 2

    def reset(self) -> None:
        self.attempts = 0


class ThrottledLog:
    """Logs each distinct message (by ``key``) at most once per ``interval_s``.

    The first occurrence is logged at once; repeats within the interval are counted, and the next
    one logged after it says how many were held back. A loop retrying a broken call every few
    hundred milliseconds thus writes one line per key every ``interval_s``, not one per retry.
    """

    MAX_KEYS = 1024

    def __init__(self, logger: logging.Logger, interval_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self._clock = clock
        self._seen: dict[Hashable, tuple[float, int]] = {}  # key -> (when last logged, repeats held back since)

    def log(self, level: int, key: Hashable, msg: str, *args: object, exc_info: BaseException | None = None) -> bool:
        """Log ``msg % args`` unless ``key`` was logged less than ``interval_s`` ago; True when it was logged."""
        now = self._clock()
        last = self._seen.get(key)
        if last is not None and now - last[0] < self.interval_s:
            self._seen[key] = (last[0], last[1] + 1)
            return False
        if len(self._seen) >= self.MAX_KEYS:
            self._seen = {k: v for k, v in self._seen.items() if now - v[0] < self.interval_s}
        self._seen[key] = (now, 0)
        if last is not None and last[1]:
            msg += f" (repeated {last[1]} more times since last logged)"
        self.logger.log(level, msg, *args, exc_info=exc_info)
        return True

    def warning(self, key: Hashable, msg: str, *args: object) -> bool:
        return self.log(logging.WARNING, key, msg, *args)

    def forget(self, key: Hashable) -> None:
        """The condition behind ``key`` is over: its next occurrence is logged at once."""
        self._seen.pop(key, None)
