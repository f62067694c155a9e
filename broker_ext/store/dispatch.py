"""A batch's per-message bookkeeping beside its records: before encoding, each message's queue offset
(``queue_offsets``); once written, per queue its consume-queue units, the key-index entries, and where each
message went (``place_puts``). One call a batch each: the compiled ones run the per-message loop in C; the
``_py`` functions are their reference (tests/unit/test_native_codec.py checks both agree)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from graymq.broker_ext.store.consume_queue import UNIT
from graymq.broker_ext.store.index_file import index_entries_py
from graymq.protocol.constants import PROPERTY_TAGS, tag_hash
from graymq.protocol.errors import MessageTooLargeError
from graymq.protocol.native import pick

R = TypeVar("R")


class PlacedFields(Protocol):
    """What ``queue_offsets`` and ``place_puts`` read of a message stored (the store's ``PutMessage``)."""

    topic: str
    queue_id: int
    body: bytes
    properties: dict[str, str]


def queue_offsets_py(puts: Sequence[PlacedFields], next_offset: Callable[[str, int], int], max_body: int
                     ) -> tuple[list[int], dict[tuple[str, int], int]]:
    """Each put's queue offset (the first put of a queue gets ``next_offset(topic, queue_id)``, the next ones
    follow it) and per queue the offset after the batch; ``MessageTooLargeError`` for a body over ``max_body``."""
    offsets = []
    ends: dict[tuple[str, int], int] = {}
    for put in puts:
        key = (put.topic, put.queue_id)
        offset = ends.get(key)
        if offset is None:
            offset = next_offset(put.topic, put.queue_id)
        if len(put.body) > max_body:
            raise MessageTooLargeError(f"message body of {len(put.body)} bytes exceeds {max_body} bytes")
        ends[key] = offset + 1
        offsets.append(offset)
    return offsets, ends


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


queue_offsets = pick("queue_offsets", queue_offsets_py)
place_puts = pick("place_puts", place_puts_py)
