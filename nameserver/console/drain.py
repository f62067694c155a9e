"""A running operation's drain progress as the group page shows it: the gray backlog left against the largest one
the console saw since the operation started (what the CLI's progress line counts from), and the gray consumers
still to turn normal."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

KEPT = 1000  # operations remembered (the newest): a finished one is not asked about again


@dataclass(frozen=True, slots=True)
class DrainProgress:
    """``left``: the gray messages not consumed yet (None: a broker did not answer); ``start``: the largest gray
    backlog seen during the operation.

    >>> p = DrainProgress(left=30, start=120, gray_consumers=1)
    >>> p.consumed, p.percent
    (90, 75)
    >>> DrainProgress(left=0, start=0, gray_consumers=0).percent
    100
    """

    left: int | None
    start: int
    gray_consumers: int

    @property
    def consumed(self) -> int | None:
        return None if self.left is None else self.start - self.left

    @property
    def percent(self) -> int | None:
        if self.left is None:
            return None
        return 100 if self.start == 0 else (self.start - self.left) * 100 // self.start


class DrainWatch:
    """Per operation id, the largest gray backlog seen while it runs (thread-safe: fragments render in threads)."""

    def __init__(self) -> None:
        self._start: OrderedDict[int, int] = OrderedDict()
        self._lock = threading.Lock()

    def progress(self, operation_id: int, backlog: int | None, gray_consumers: int) -> DrainProgress:
        """The progress of ``operation_id`` now that its group's gray backlog is ``backlog``."""
        with self._lock:
            start = max(self._start.pop(operation_id, 0), backlog or 0)
            self._start[operation_id] = start
            while len(self._start) > KEPT:
                self._start.popitem(last=False)
        return DrainProgress(backlog, start, gray_consumers)
