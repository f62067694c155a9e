"""An offline check of a stopped broker's store: ``graymq broker verify --store DIR [--repair]``.

The check changes nothing: segments, consume queues and key index are opened read-only under a
shared lock of the directory (a running broker holds it exclusively: lock.py), the whole commit log
is scanned with the scanner recovery uses (log_scan.py) and queues and index are checked against it
(store_check.py). It reports the holes (marking those the store has already recorded), a torn tail,
and every consume-queue unit or index entry that disagrees with the log.

``repair`` loads the store as a broker does, with recovery scanning the whole log (recovery.py): that
fixes whatever the check reports, except that a hole stays a hole (its messages are lost), recorded.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graymq.broker_ext.store.commitlog import CommitLog
from graymq.broker_ext.store.consume_queue import ConsumeQueues
from graymq.broker_ext.store.deleted_topics import DeletedTopics
from graymq.broker_ext.store.holes import HoleLog
from graymq.broker_ext.store.index_file import KeyIndex
from graymq.broker_ext.store.layout import written_cq_units_per_file, written_segment_size
from graymq.broker_ext.store.lock import StoreLock
from graymq.broker_ext.store.log_scan import Hole, TornTail, scan_log
from graymq.broker_ext.store.message_store import MessageStore, StoreConfig
from graymq.broker_ext.store.store_check import Finding, StoreCheck
from graymq.protocol.errors import ConfigError


@dataclass(slots=True)
class VerifyReport:
    """What a check found (or a repair fixed) in one store."""

    store_dir: Path
    holes: list[Hole]
    torn_tail: TornTail | None
    findings: list[Finding]
    recorded: set[int] = field(default_factory=set)  # physical offsets of the holes the store had recorded
    clean_stop: bool = True  # the broker stopped cleanly (no abort marker), for a check
    repaired: bool = False

    @property
    def clean(self) -> bool:
        return not self.holes and self.torn_tail is None and not self.findings

    def to_json(self) -> dict[str, Any]:
        return {
            "clean": self.clean,
            "holes": [{**h.to_json(), "recorded": h.physical_offset in self.recorded} for h in self.holes],
            "torn_tail": None if self.torn_tail is None else self.torn_tail.to_json(),
            "consume_queues": [f.to_json() for f in self.findings if f.file.startswith("consumequeue/")],
            "index": [f.to_json() for f in self.findings if f.file.startswith("index/")],
            "clean_stop": self.clean_stop,
            "repaired": self.repaired,
        }


def verify_store(store_dir: Path, repair: bool = False) -> VerifyReport:
    """Check (or ``repair``) the store in ``store_dir``; ``ConfigError`` when it cannot be read or a running
    broker holds it."""
    store_dir = Path(store_dir)
    if not store_dir.is_dir():
        raise ConfigError(f"store {store_dir}: no such directory")
    if not (store_dir / "commitlog").is_dir():
        raise ConfigError(f"store {store_dir}: not a broker store (no commitlog directory)")
    try:
        return _repair(store_dir) if repair else _check(store_dir)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"store {store_dir}: cannot read it: {exc}") from exc


def _config(store_dir: Path) -> StoreConfig:
    """The store's own segment and consume-queue file sizes (defaults when it has no such file)."""
    sizes = {"segment_size": written_segment_size(store_dir), "cq_units_per_file": written_cq_units_per_file(store_dir)}
    return StoreConfig(store_dir=store_dir, **{k: v for k, v in sizes.items() if v is not None})


def _check(store_dir: Path) -> VerifyReport:
    lock = StoreLock(store_dir)
    lock.acquire(shared=True)
    config = _config(store_dir)
    commitlog = CommitLog(store_dir / "commitlog", config.segment_size, read_only=True)
    queues = ConsumeQueues(store_dir / "consumequeue", config.cq_units_per_file, read_only=True)
    index = KeyIndex(store_dir / "index", read_only=True)
    try:
        commitlog.load()
        queues.load()
        index.load()
        holes = HoleLog(store_dir / "holes")
        holes.load()
        deleted = DeletedTopics(store_dir / "deleted_topics")
        deleted.load()
        start = commitlog.min_offset if commitlog.segments else 0
        check = StoreCheck(queues, index, start, repair=False, deleted=deleted)
        scan = scan_log(commitlog.segments, start, check)
        check.finish(scan.end_offset)
    finally:
        commitlog.close()
        queues.close()
        index.close()
        lock.release()
    return VerifyReport(store_dir, check.holes, scan.torn_tail, check.findings, recorded=set(holes.holes),
                        clean_stop=not (store_dir / "abort").exists())


def _repair(store_dir: Path) -> VerifyReport:
    store = MessageStore(_config(store_dir))
    result = store.load(full_scan=True)
    asyncio.run(store.stop())
    return VerifyReport(store_dir, list(result.holes), result.torn_tail, list(result.findings),
                        recorded=set(store.holes.holes), repaired=True)
