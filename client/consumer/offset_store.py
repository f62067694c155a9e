"""Where consumer offsets live: on the brokers for clustering, in a local file for broadcasting."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from graymq.client.message import MessageQueue
from graymq.protocol.broker_client import BrokerClient
from graymq.protocol.errors import GrayMQError


class OffsetStore(Protocol):
    async def read(self, mq: MessageQueue, address: str) -> int: ...  # -1 when never committed
    async def write(self, mq: MessageQueue, address: str, offset: int) -> None: ...
    async def flush(self) -> None: ...
    async def group_committed(self, addresses: Iterable[str]) -> bool: ...  # any offset, any queue


class RemoteOffsetStore:
    """Clustering: the group's offsets on the broker that owns each queue; commits name ``client_id``, so the
    broker refuses them once another client holds the queue's lease."""

    def __init__(self, brokers: BrokerClient, group: str, client_id: str = "") -> None:
        self.brokers = brokers
        self.group = group
        self.client_id = client_id

    async def read(self, mq: MessageQueue, address: str) -> int:
        return await self.brokers.query_offset(address, self.group, mq.topic, mq.queue_id)

    async def write(self, mq: MessageQueue, address: str, offset: int) -> None:
        await self.brokers.update_offset(address, self.group, mq.topic, mq.queue_id, offset, self.client_id)

    async def flush(self) -> None:
        return None

    async def group_committed(self, addresses: Iterable[str]) -> bool:
        """Whether the group committed an offset of any queue on any of these brokers.

        Raises the ``GrayMQError`` of a broker that did not answer unless another one said yes.
        """
        answers = await asyncio.gather(*(self.brokers.group_backlog(address, self.group) for address in addresses),
                                       return_exceptions=True)
        failures = []
        for answer in answers:
            if isinstance(answer, GrayMQError):
                failures.append(answer)
            elif isinstance(answer, BaseException):
                raise answer
            elif any(q.consumer_offset >= 0 for q in answer):
                return True
        if failures:
            raise failures[0]
        return False


class LocalFileOffsetStore:
    """Broadcasting: every client keeps its own offsets in a JSON file (written atomically on flush)."""

    def __init__(self, directory: Path, group: str, client_id: str) -> None:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in client_id)
        self.path = directory / group / f"{safe}.json"
        self._offsets: dict[str, int] = {}
        if self.path.exists():
            self._offsets = {k: int(v) for k, v in json.loads(self.path.read_text()).items()}

    async def read(self, mq: MessageQueue, address: str) -> int:
        return self._offsets.get(str(mq), -1)

    async def write(self, mq: MessageQueue, address: str, offset: int) -> None:
        self._offsets[str(mq)] = offset

    async def group_committed(self, addresses: Iterable[str]) -> bool:
        return bool(self._offsets)

    async def flush(self) -> None:
        """Write the offsets (temp file, fsync, rename); a file system error raises ``GrayMQError`` (retry later)."""
        tmp = self.path.with_suffix(".tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "w") as f:
                json.dump(self._offsets, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except OSError as exc:
            raise GrayMQError(f"cannot write offsets to {self.path}: {exc}") from exc
