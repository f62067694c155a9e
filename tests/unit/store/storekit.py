"""Helpers for the store tests: small configs, message factories, crash and corruption tools."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from graymq.broker_ext.store import AppendResult, GetStatus, MessageStore, PutMessage, StoreConfig
from graymq.protocol.record import MessageExt, decode_record, make_properties

SEGMENT = 64 * 1024


def make_config(store_dir: Path, **overrides: Any) -> StoreConfig:
    settings: dict[str, Any] = {
        "segment_size": SEGMENT, "cq_units_per_file": 64, "store_host": "127.0.0.1:10911",
    }
    settings.update(overrides)
    return StoreConfig(store_dir=store_dir, **settings)


def open_store(config: StoreConfig, **kwargs: Any) -> MessageStore:
    store = MessageStore(config, **kwargs)
    store.load()
    return store


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(coro)


def stop(store: MessageStore) -> None:
    asyncio.run(store.stop())


def crash(store: MessageStore) -> None:
    """Leave the store as a killed process does: no flush, no checkpoint, the abort marker stays.

    Written bytes stay in the page cache, so the next ``load`` sees them; only the mappings and
    descriptors of this process go away.
    """
    store.commitlog.close()
    store.queues.close()
    store.index.close()


def body_for(topic: str, queue_id: int, n: int, size: int = 100) -> bytes:
    head = f"{topic}/{queue_id}/{n}|".encode()
    return head + bytes((n + i) % 251 for i in range(max(0, size - len(head))))


def message(topic: str, queue_id: int, n: int, *, size: int = 100, tags: str = "", keys: tuple[str, ...] = (),
            msg_id: str | None = None) -> PutMessage:
    properties = make_properties(tags=tags, keys=list(keys), msg_id=msg_id or f"{topic}-{queue_id}-{n}")
    return PutMessage(topic=topic, queue_id=queue_id, body=body_for(topic, queue_id, n, size), properties=properties,
                      born_timestamp=1_000 + n, born_host="10.0.0.1:5000")


def put(store: MessageStore, topic: str, queue_id: int, count: int, *, start: int = 0,
        **kwargs: Any) -> list[AppendResult]:
    """``count`` single-message puts numbered from ``start``."""
    results = []
    for n in range(start, start + count):
        results.extend(store.put_messages([message(topic, queue_id, n, **kwargs)]))
    return results


def read_all(store: MessageStore, topic: str, queue_id: int, tags: frozenset[str] | None = None,
             max_nums: int = 32) -> list[MessageExt]:
    """Every readable message of the queue from its min offset, pulled the way a consumer does."""
    offset = store.get_min_offset(topic, queue_id)
    found: list[MessageExt] = []
    while True:
        result = store.get_messages(topic, queue_id, offset, max_nums, tags)
        if result.status is GetStatus.NO_NEW_MSG:
            return found
        assert result.status in (GetStatus.FOUND, GetStatus.NO_MATCHED_MSG), result.status
        assert result.next_begin_offset > offset
        found.extend(decode_record(bytes(r)) for r in result.records)
        offset = result.next_begin_offset


def segment_file(store: MessageStore, physical_offset: int) -> tuple[Path, int]:
    """The commit-log file holding ``physical_offset`` and the position inside it."""
    size = store.config.segment_size
    start = physical_offset - physical_offset % size
    return store.config.store_dir / "commitlog" / f"{start:020d}", physical_offset - start


def patch_file(path: Path, pos: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(data)


def flip_bit(path: Path, pos: int, bit: int = 0) -> None:
    with open(path, "r+b") as f:
        f.seek(pos)
        byte = f.read(1)[0]
        f.seek(pos)
        f.write(bytes([byte ^ (1 << bit)]))
