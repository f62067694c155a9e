"""Read back what stock clients stored: every message of a topic, pulled by graymq's own PullConsumer."""

from __future__ import annotations

import asyncio
import time

from graymq.client import MessageExt, PullConsumer
from graymq.client.message import MessageQueue
from graymq.core.queue_layout import gray_queue_ids


async def _whole_queue(reader: PullConsumer, mq: MessageQueue) -> list[MessageExt]:
    """Every message stored in ``mq``, from offset 0 to its end."""
    messages: list[MessageExt] = []
    offset = 0
    while True:
        pulled = await reader.pull(mq, offset, max_nums=64)
        if not pulled.messages:
            return messages
        messages.extend(pulled.messages)
        offset = pulled.next_begin_offset


def stored_messages(ns_url: str, topic: str, queues: int, gray: int, expected: int, broker: str = "broker-a",
                    timeout: float = 20.0) -> list[MessageExt]:
    """Every message of ``topic`` on ``broker``, each queue read from offset 0 to its end, until ``expected`` are there
    (or ``timeout`` passes)."""
    gray_ids = set(gray_queue_ids(queues, gray))

    async def pull() -> list[MessageExt]:
        readers = {side: PullConsumer("GID_STOCK_READER", ns_url, gray=side, register=False) for side in (False, True)}
        try:
            deadline = time.monotonic() + timeout
            while True:
                messages: list[MessageExt] = []
                for queue_id in range(queues):
                    mq = MessageQueue(topic, broker, queue_id)
                    messages.extend(await _whole_queue(readers[queue_id in gray_ids], mq))
                if len(messages) >= expected or time.monotonic() > deadline:
                    return messages
                await asyncio.sleep(0.2)
        finally:
            for reader in readers.values():
                await reader.stop()

    return asyncio.run(pull())
