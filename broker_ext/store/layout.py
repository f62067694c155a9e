"""The file sizes an existing store was written with.

Commit-log segments and consume-queue files are preallocated to a fixed size, and offsets are
found by dividing by it, so a store keeps the sizes it was created with: a different configured
size applies to a new store only. Every file of a kind has the same size, so one of them is read.
"""

from __future__ import annotations

from pathlib import Path

from graymq.broker_ext.store.consume_queue import UNIT
from graymq.broker_ext.store.mapped_file import NAME_DIGITS, list_files


def written_segment_size(store_dir: Path) -> int | None:
    """The size of the store's commit-log segments, ``None`` for a store without any."""
    files = list_files(store_dir / "commitlog")
    size = files[0][1].stat().st_size if files else 0
    return size or None  # 0: created by a crash before it was preallocated


def written_cq_units_per_file(store_dir: Path) -> int | None:
    """Units per consume-queue file of the store, ``None`` for a store without any."""
    for path in (store_dir / "consumequeue").glob("*/*/" + "[0-9]" * NAME_DIGITS):
        size = path.stat().st_size
        if size and size % UNIT.size == 0:
            return size // UNIT.size
    return None
