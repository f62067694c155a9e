"""Acks made as durable as the broker's messages: an append-only journal following the store's ``flush`` mode.

Each line is a JSON object: an ack ``{"g", "t", "q", "o"}`` (group, topic, queue id, offset) or, written by a
compaction, a floor ``{"g", "t", "q", "floor"}`` (every offset below it is acked). A line cut short by a crash is
the last one and is ignored on replay. Once the journal is larger than ``compact_bytes`` it is rewritten
atomically from the acks' current state (floors and the acks above them).

- sync (``sync=True``): an append returns once its lines are fsynced. Acks arriving while a write is under way
  wait for the next one, so one fsync answers every ack of a burst (group commit).
- async: an append returns once its lines are written to the file (the page cache: they survive kill -9 of the
  process, not a power cut); the journal is fsynced every ``interval_s``, as the commit log is.
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
from graymq.protocol.aio import wait_event

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
    """``await append(lines)`` returns once ``lines`` are as durable as the mode says (see the module doc);
    ``snapshot`` gives the state to compact to."""

    def __init__(self, path: Path, snapshot: Snapshot, *, sync: bool = True, interval_s: float = 0.2,
                 compact_bytes: int = COMPACT_BYTES) -> None:
        self.path = path
        self._snapshot = snapshot
        self.sync = sync
        self.interval_s = interval_s
        self.compact_bytes = compact_bytes
        self._file = open(path, "ab")  # noqa: SIM115 - held for the journal's life, closed by close()
        self._buffer: list[bytes] = []
        self._waiters: list[asyncio.Future[None]] = []
        self._writer: asyncio.Task[None] | None = None
        self._dirty = False  # async mode: written since the last fsync
        self._failed: OSError | None = None  # async mode: a periodic fsync failed; no append is accepted since
        self._compacting = False  # async mode: the flush loop rewrites the file; appends wait for it
        self._closing = asyncio.Event()
        self.fsyncs = 0  # fsyncs made: acks / fsyncs is the batching (group commit, or the flush interval)

    async def append(self, lines: list[bytes]) -> None:
        if not self.sync:
            await self._append_written(b"".join(lines))
            return
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

    async def _append_written(self, data: bytes) -> None:
        """Async mode: write ``data`` to the file now (after a compaction under way); the flush loop fsyncs it."""
        while self._writer is not None and not self._writer.done() and self._compacting:
            await asyncio.shield(self._writer)
        if self._failed is not None:
            raise self._failed
        self._file.write(data)
        self._file.flush()  # one os.write: in the page cache before the ack is answered
        self._dirty = True
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._flush_loop(), name="pop ack journal flush")

    async def _flush_loop(self) -> None:
        """Async mode: fsync what was written every ``interval_s``, compact when due; ends once nothing is left."""
        while self._dirty and self._failed is None:
            await wait_event(self._closing, self.interval_s)  # close() cuts the interval short
            self._dirty = False
            try:
                await asyncio.to_thread(self._fsync)
                if self._file.tell() > self.compact_bytes:
                    self._compacting = True  # appends wait: their lines go to the compacted file
                    try:
                        await asyncio.to_thread(self._compact, self._snapshot())
                    finally:
                        self._compacting = False
            except OSError as exc:
                log.error("ack journal %s: %s; acks are refused from now", self.path, exc)
                self._failed = exc

    def _fsync(self) -> None:
        os.fsync(self._file.fileno())
        self.fsyncs += 1

    def _write(self, data: bytes) -> None:
        self._file.write(data)
        self._file.flush()
        self._fsync()

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
        """Let the writes under way finish (async mode: fsynced now, without waiting for the interval), close."""
        self._closing.set()
        if self._writer is not None:
            await asyncio.shield(self._writer)
        self._file.close()
