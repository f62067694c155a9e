"""Acks made durable before they are answered: an append-only journal, fsynced in groups, compacted.

Each line is a JSON object: an ack ``{"g", "t", "q", "o"}`` (group, topic, queue id, offset) or, written by a
compaction, a floor ``{"g", "t", "q", "floor"}`` (every offset below it is acked). Acks arriving while a write is
under way wait for the next one, so one fsync answers every ack of a burst (group commit). A line cut short by a
crash is the last one and is ignored on replay. Once the journal is larger than ``compact_bytes`` it is
rewritten atomically from the acks' current state (floors and the acks above them).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from graymq.broker_ext.store.atomic_file import write_atomic

log = logging.getLogger(__name__)

QueueKey = tuple[str, str, int]  # (group, topic, queue id)
COMPACT_BYTES = 4 << 20


@dataclass(slots=True)
class QueueAcks:
    """What the journal says of one queue: every offset below ``floor`` is acked (-1: nothing said), and the acks
    at or above it."""

    floor: int = -1
    offsets: set[int] = field(default_factory=set)


Snapshot = Callable[[], dict[QueueKey, QueueAcks]]


def _line(record: dict[str, object]) -> bytes:
    return json.dumps(record, separators=(",", ":")).encode() + b"\n"


def ack_line(key: QueueKey, offset: int) -> bytes:
    return _line({"g": key[0], "t": key[1], "q": key[2], "o": offset})


def replay(path: Path) -> dict[QueueKey, QueueAcks]:
    """Read the journal at ``path`` (absent: empty)."""
    table: dict[QueueKey, QueueAcks] = {}
    if not path.exists():
        return table
    lines = path.read_bytes().split(b"\n")
    for number, raw in enumerate(lines, 1):
        if not raw:
            continue
        try:
            record = json.loads(raw)
            key = (str(record["g"]), str(record["t"]), int(record["q"]))
        except (ValueError, KeyError, TypeError):
            if number < len(lines) - 1:  # not the torn last line: say so, keep the rest
                log.warning("ack journal %s: line %d cannot be read; skipped", path, number)
            continue
        acks = table.setdefault(key, QueueAcks())
        if "floor" in record:
            acks.floor = max(acks.floor, int(record["floor"]))
        else:
            acks.offsets.add(int(record["o"]))
    for acks in table.values():
        acks.offsets = {o for o in acks.offsets if o >= acks.floor}
    return table


class AckJournal:
    """``await append(lines)`` returns once ``lines`` are on disk; ``snapshot`` gives the state to compact to."""

    def __init__(self, path: Path, snapshot: Snapshot, *, compact_bytes: int = COMPACT_BYTES) -> None:
        self.path = path
        self._snapshot = snapshot
        self.compact_bytes = compact_bytes
        self._file = open(path, "ab")  # noqa: SIM115 - held for the journal's life, closed by close()
        self._buffer: list[bytes] = []
        self._waiters: list[asyncio.Future[None]] = []
        self._writer: asyncio.Task[None] | None = None
        self.fsyncs = 0  # writes made (each one fsync): acks / fsyncs is the group commit's batching

    async def append(self, lines: list[bytes]) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._buffer.extend(lines)
        self._waiters.append(waiter)
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write_all(), name="pop ack journal")
        await asyncio.shield(waiter)

    async def _write_all(self) -> None:
        while self._buffer:
            data, waiters = b"".join(self._buffer), self._waiters
            self._buffer, self._waiters = [], []
            try:
                await asyncio.to_thread(self._write, data)
                if self._file.tell() > self.compact_bytes:
                    snapshot = self._snapshot()  # on the loop, between writes: exactly what is durable
                    await asyncio.to_thread(self._compact, snapshot)
            except OSError as exc:
                for waiter in waiters:
                    if not waiter.done():
                        waiter.set_exception(exc)
                continue
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    def _write(self, data: bytes) -> None:
        self._file.write(data)
        self._file.flush()
        os.fsync(self._file.fileno())
        self.fsyncs += 1

    def _compact(self, snapshot: dict[QueueKey, QueueAcks]) -> None:
        lines = []
        for key, acks in snapshot.items():
            if acks.floor >= 0:
                lines.append(_line({"g": key[0], "t": key[1], "q": key[2], "floor": acks.floor}))
            lines.extend(ack_line(key, offset) for offset in sorted(acks.offsets))
        write_atomic(self.path, b"".join(lines))
        self._file.close()
        self._file = open(self.path, "ab")  # noqa: SIM115

    async def close(self) -> None:
        if self._writer is not None:
            await asyncio.shield(self._writer)
        self._file.close()
