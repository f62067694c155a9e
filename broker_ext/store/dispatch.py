"""What a batch of records just written adds beside the commit log: per queue its consume-queue units, the
key-index entries, and where each message went. One call a batch (``place_puts``): the compiled one runs the
per-message loop in C; ``place_puts_py`` is its reference (tests/unit/test_native_codec.py checks both agree)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from graymq.broker_ext.store.consume_queue import UNIT
from graymq.broker_ext.store.index_file import index_entries_py
from graymq.protocol.constants import PROPERTY_TAGS, tag_hash
from graymq.protocol.native import pick

R = TypeVar("R")


class PlacedFields(Protocol):
    """What ``place_puts`` reads of a message stored (the store's ``PutMessage``)."""

    topic: str
    queue_id: int
    properties: dict[str, str]


def place_puts_py(puts: Sequence[PlacedFields], queue_offsets: Sequence[int], sizes: Sequence[int],
                  physical_offset: int, store_timestamp: int, result_class: Callable[[int, int, int, int, int], R]
                  ) -> tuple[dict[tuple[str, int], bytearray], bytes, list[R]]:
    """For ``puts`` stored end to end from ``physical_offset`` (record sizes ``sizes``, at ``queue_offsets``):
    the units to append per (topic, queue id) in order, the key-index entries, and
    ``result_class(physical_offset, size, queue_offset, store_timestamp, end_offset)`` per put."""
    units: dict[tuple[str, int], bytearray] = {}
    tag_hashes: dict[str, int] = {}
    entries = []
    results = []
    for put, queue_offset, size in zip(puts, queue_offsets, sizes, strict=True):
        properties = put.properties
        tags = properties.get(PROPERTY_TAGS, "")
        hashed = tag_hashes.get(tags)
        if hashed is None:
            hashed = tag_hashes[tags] = tag_hash(tags)
        key = (put.topic, put.queue_id)
        block = units.get(key)
        if block is None:
            block = units[key] = bytearray()
        block += UNIT.pack(physical_offset, size, hashed)
        entry = index_entries_py(put.topic, properties, physical_offset, store_timestamp)
        if entry:
            entries.append(entry)
        results.append(result_class(physical_offset, size, queue_offset, store_timestamp, physical_offset + size))
        physical_offset += size
    return units, b"".join(entries), results


place_puts = pick("place_puts", place_puts_py)
