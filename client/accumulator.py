"""Auto batching: the sends of one turn of the event loop for one (topic, gray side, sharding key) leave as one
SEND_BATCH at the end of that turn (RocketMQ 5's autoBatch without its linger; aiokafka's message accumulator and
sender are the model).

A message is never held back waiting for others: a lone send leaves from its own coroutine as a plain
SEND_MESSAGE one loop turn later; a batch leaves from a task at the end of the turn, or at once when it reaches
``max_messages`` messages or ``max_bytes`` body bytes. A batch the broker refuses as a whole (a non-retriable
error: it stored nothing) is resent one message at a time, so each sender gets its own answer; a retriable
failure (the producer's retries are spent) fails every message of the batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

from graymq.client.message import SendResult
from graymq.protocol.errors import GrayMQError

BatchKey: TypeAlias = tuple[str, "bool | str", "str | None"]  # topic, side (a lane's name, or gray), sharding key
Fields: TypeAlias = dict[str, Any]  # a pb.Message as constructor fields
SendOne: TypeAlias = Callable[[str, "bool | str", "str | None", Fields], Awaitable[SendResult]]
SendBatch: TypeAlias = Callable[[str, "bool | str", "str | None", list[Fields]], Awaitable[list[SendResult]]]


class _OpenBatch:
    """Messages waiting for the end of this turn of the loop, each with the future of its send."""

    __slots__ = ("items", "size")

    def __init__(self) -> None:
        self.items: list[tuple[Fields, asyncio.Future[SendResult]]] = []
        self.size = 0


async def settle(future: asyncio.Future[SendResult], send: Awaitable[SendResult]) -> None:
    """Await ``send`` and hand its outcome to ``future`` (unless the caller gave up on it)."""
    try:
        result = await send
    except Exception as exc:  # noqa: BLE001 - delivered to the caller awaiting the future
        if not future.done():
            future.set_exception(exc)
        return
    if not future.done():
        future.set_result(result)


def _fail_all(items: list[tuple[Fields, asyncio.Future[SendResult]]], exc: BaseException) -> None:
    for _, future in items:
        if not future.done():
            future.set_exception(exc)


class MessageAccumulator:
    """Open batches per ``BatchKey`` and the tasks sending the closed ones; ``send_one`` / ``send_batch`` send
    (with the producer's retries). ``await flush()`` sends what is open and waits for what is in flight."""

    def __init__(self, send_one: SendOne, send_batch: SendBatch, *, max_messages: int, max_bytes: int) -> None:
        self._send_one = send_one
        self._send_batch = send_batch
        self.max_messages = max(1, max_messages)
        self.max_bytes = max_bytes
        self._open: dict[BatchKey, _OpenBatch] = {}
        self._in_flight: dict[asyncio.Task[None], BatchKey] = {}

    async def send(self, key: BatchKey, fields: Fields, size: int) -> SendResult:
        """Send one message, joining the batch open for ``key`` or opening one the other sends of this loop turn
        join; alone at the end of the turn, it leaves from this coroutine as a plain send (no task)."""
        batch = self._open.get(key)
        if batch is not None:
            return await self._add(key, batch, fields, size)
        batch = self._open[key] = _OpenBatch()
        future = self._add(key, batch, fields, size)
        try:
            await asyncio.sleep(0)
        finally:  # cancelled too: the messages that joined still leave
            alone = self._open.get(key) is batch and len(batch.items) == 1
            if alone:
                del self._open[key]
            else:
                self._close(key, batch)
        if alone:
            return await self._send_one(*key, fields)
        return await future

    def append(self, key: BatchKey, fields: Fields, size: int) -> asyncio.Future[SendResult]:
        """Add a message to the open batch of ``key`` (no task per message); the batch leaves at the end of this
        turn of the loop, or at once when full. Returns the message's future."""
        batch = self._open.get(key)
        if batch is None:
            batch = self._open[key] = _OpenBatch()
            asyncio.get_running_loop().call_soon(self._close, key, batch)
        return self._add(key, batch, fields, size)

    def holds(self, *, gray: bool) -> bool:
        """Whether a batch of that side (gray: of any lane) is open or sent and not yet answered."""
        return any(bool(key[1]) == gray for key in (*self._open, *self._in_flight.values()))

    async def flush(self) -> None:
        """Send the open batches and wait until every batch in flight is answered."""
        for key, batch in list(self._open.items()):
            self._close(key, batch)
        if self._in_flight:
            await asyncio.gather(*self._in_flight, return_exceptions=True)

    def _add(self, key: BatchKey, batch: _OpenBatch, fields: Fields, size: int) -> asyncio.Future[SendResult]:
        future: asyncio.Future[SendResult] = asyncio.get_running_loop().create_future()
        batch.items.append((fields, future))
        batch.size += size
        if len(batch.items) >= self.max_messages or batch.size >= self.max_bytes:
            self._close(key, batch)
        return future

    def _close(self, key: BatchKey, batch: _OpenBatch) -> None:
        if self._open.get(key) is not batch:
            return  # closed already (full)
        del self._open[key]
        task = asyncio.get_running_loop().create_task(self._drain(key, batch.items))
        self._in_flight[task] = key
        task.add_done_callback(self._in_flight.pop)

    async def _drain(self, key: BatchKey, items: list[tuple[Fields, asyncio.Future[SendResult]]]) -> None:
        """Send a closed batch and settle each of its futures."""
        if len(items) == 1:
            fields, future = items[0]
            await settle(future, self._send_one(*key, fields))
            return
        try:
            results = await self._send_batch(*key, [fields for fields, _ in items])
        except GrayMQError as exc:
            if exc.retriable:
                _fail_all(items, exc)
                return
            # Refused as a whole (the broker stores nothing of a refused batch): one by one, so each message
            # gets its own answer and one bad message does not fail the others.
            for fields, future in items:
                await settle(future, self._send_one(*key, fields))
            return
        except BaseException as exc:
            _fail_all(items, exc)
            raise
        for (_, future), result in zip(items, results, strict=True):
            if not future.done():
                future.set_result(result)
