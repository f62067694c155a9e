"""Committed consumer offsets per (group, topic, queue), persisted atomically on an interval and at stop."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from graymq.broker_ext.store.atomic_file import read_json, write_json_atomic
from graymq.broker_ext.store.background import BlockingWork

KEY_SEPARATOR = "@"


class ConsumerOffsetManager:
    """``offsets[group@topic][queue_id] = next offset to consume`` (the lowest not yet consumed)."""

    def __init__(self, config_dir: Path) -> None:
        self._path = config_dir / "consumer_offsets.json"
        self._offsets: dict[str, dict[int, int]] = {}
        self._dirty = False

    def load(self) -> None:
        raw = read_json(self._path, {"offsets": {}})["offsets"]
        self._offsets = {key: {int(q): int(o) for q, o in queues.items()} for key, queues in raw.items()}

    def persist(self) -> None:
        """Write the offsets now, on the caller's thread (at stop, once no background write is in flight)."""
        if self._dirty:
            self._dirty = False
            write_json_atomic(self._path, {"offsets": self._offsets})

    async def persist_off_loop(self, work: BlockingWork) -> None:
        """Snapshot the offsets here, write and fsync them in a worker thread: a slow disk must not stall the
        broker's event loop (two fsyncs a round). A failed write leaves them dirty for the next round."""
        if not self._dirty:
            return
        self._dirty = False
        try:
            await work.write_json(self._path, {"offsets": self._offsets})
        except OSError:
            self._dirty = True
            raise

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        queues = self._offsets.setdefault(f"{group}{KEY_SEPARATOR}{topic}", {})
        if queues.get(queue_id) != offset:
            queues[queue_id] = offset
            self._dirty = True

    def replace(self, items: Iterable[tuple[str, str, int, int]]) -> None:
        """Take every (group, topic, queue_id, offset) as the whole table (a follower, from its leader)."""
        table: dict[str, dict[int, int]] = {}
        for group, topic, queue_id, offset in items:
            table.setdefault(f"{group}{KEY_SEPARATOR}{topic}", {})[queue_id] = offset
        if table != self._offsets:
            self._offsets = table
            self._dirty = True

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when the group never committed this queue."""
        return self._offsets.get(f"{group}{KEY_SEPARATOR}{topic}", {}).get(queue_id, -1)

    def drop_topic(self, topic: str) -> None:
        """Forget every group's offsets of ``topic`` (deleted)."""
        self._drop([key for key in self._offsets if key.partition(KEY_SEPARATOR)[2] == topic])

    def drop_group(self, group: str) -> None:
        """Forget every offset of ``group`` (deleted)."""
        self._drop([key for key in self._offsets if key.partition(KEY_SEPARATOR)[0] == group])

    def _drop(self, keys: list[str]) -> None:
        for key in keys:
            del self._offsets[key]
        if keys:
            self._dirty = True

    def topics_of(self, group: str) -> list[str]:
        prefix = f"{group}{KEY_SEPARATOR}"
        return [key[len(prefix):] for key in self._offsets if key.startswith(prefix)]

    def items(self) -> Iterator[tuple[str, str, int, int]]:
        """Every (group, topic, queue_id, offset)."""
        for key, queues in self._offsets.items():
            group, _, topic = key.partition(KEY_SEPARATOR)
            for queue_id, offset in queues.items():
                yield group, topic, queue_id, offset
