"""A mapping that keeps only its most recently used entries: the client's per-process tables of values computed
from the brokers' answers (group views, whole-group allocations), bounded per group."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Lru(Generic[K, V]):
    """At most ``size`` entries; reading or writing one makes it the latest, and a write past ``size`` drops the
    least recently used.

    >>> table = Lru[str, int](2)
    >>> table.put("a", 1), table.put("b", 2), table.get("a"), table.put("c", 3)
    (1, 2, 1, 3)
    >>> table.get("b") is None, table.get("a"), len(table)
    (True, 1, 2)
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> V:
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
        return value

    def setdefault(self, key: K, make: Callable[[], V]) -> V:
        """The entry of ``key``, made by ``make()`` when there is none."""
        value = self.get(key)
        return self.put(key, make()) if value is None else value

    def __len__(self) -> int:
        return len(self._entries)
