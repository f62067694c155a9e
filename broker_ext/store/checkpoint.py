"""The store checkpoint: what recovery may trust after a crash.

Written atomically (``store_dir/checkpoint``, JSON) every second and at a clean stop. Taken in this
order: the commit log's flushed offset and every queue's max offset are read, then consume
queues and key index are synced, then the file is written. So after a crash:

- the commit log is durable up to ``commitlog_offset`` (recovery scans from a little before it);
- consume-queue units and index entries of every record below it are durable;
- a consume queue whose max offset on disk is below ``queue_offsets`` lost files and is rebuilt
  from the start of the log.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from graymq.broker_ext.store.atomic_file import read_json, write_json_atomic

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Checkpoint:
    commitlog_offset: int = 0
    timestamp_ms: int = 0
    queue_offsets: dict[str, dict[int, int]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> Checkpoint | None:
        """The saved checkpoint; ``None`` when there is none or it cannot be read (recovery then scans it all)."""
        try:
            raw = read_json(path, None)
            if raw is None:
                return None
            return cls(
                commitlog_offset=int(raw["commitlog_offset"]),
                timestamp_ms=int(raw["timestamp_ms"]),
                queue_offsets={
                    topic: {int(q): int(o) for q, o in queues.items()}
                    for topic, queues in raw["queue_offsets"].items()
                },
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("ignoring unreadable checkpoint %s (%s): recovering from the start of the log", path, exc)
            return None

    def save(self, path: Path) -> None:
        write_json_atomic(path, {
            "commitlog_offset": self.commitlog_offset,
            "timestamp_ms": self.timestamp_ms,
            "queue_offsets": {t: {str(q): o for q, o in qs.items()} for t, qs in self.queue_offsets.items()},
        })
