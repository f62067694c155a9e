"""Topics deleted from the store, kept across restarts so recovery does not bring their messages back.

``store_dir/deleted_topics`` (JSON, written atomically) maps a topic to the commit-log end when it was
last deleted. Its consume queues are gone; its records below that offset stay in the commit log until
retention removes them, and nothing serves them: recovery does not dispatch them to consume queues and
key lookups skip them. A topic created again gets records past that offset, served as usual. Entries
below the commit log's min offset are forgotten (their records are gone).
"""

from __future__ import annotations

import logging
from pathlib import Path

from graymq.broker_ext.store.atomic_file import read_json, write_json_atomic

log = logging.getLogger(__name__)


class DeletedTopics:
    """topic -> commit-log offset at its deletion; records of the topic below it are deleted."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offsets: dict[str, int] = {}

    def load(self) -> None:
        try:
            raw = read_json(self.path, {"topics": {}})
            self.offsets = {str(topic): int(offset) for topic, offset in raw["topics"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.error("ignoring unreadable deleted-topic record %s (%s): recovery may serve deleted messages again",
                      self.path, exc)

    def add(self, topic: str, offset: int) -> None:
        """Record that ``topic``'s records below ``offset`` are deleted, durably before returning."""
        self.offsets[topic] = max(offset, self.offsets.get(topic, 0))
        self._save()

    def deleted(self, topic: str, physical_offset: int) -> bool:
        """Whether the record of ``topic`` at ``physical_offset`` belongs to a deleted topic."""
        return physical_offset < self.offsets.get(topic, -1)

    def forget_below(self, min_offset: int) -> None:
        """Drop topics whose deleted records are all gone from the commit log."""
        gone = [topic for topic, offset in self.offsets.items() if offset <= min_offset]
        for topic in gone:
            del self.offsets[topic]
        if gone:
            self._save()

    def _save(self) -> None:
        write_json_atomic(self.path, {"topics": dict(sorted(self.offsets.items()))})
