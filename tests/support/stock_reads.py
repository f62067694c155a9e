"""Read back what stock clients stored: every message of a topic, pulled by graymq's own PullConsumer."""

from __future__ import annotations

import asyncio
import time

from graymq.client import MessageExt, PullConsumer
from graymq.client.message import MessageQueue
from graymq.protocol.gray import gray_queue_ids


def stored_messages(ns_url: str, topic: str, queues: int, gray: int, expected: int, broker: str = "broker-a",
                    timeout: float = 20.0) -> list[MessageExt]:
    """Every message of ``topic`` on ``broker``, pulled queue by queue from offset 0 until ``expected`` are there
    (or ``timeout`` passes)."""
    gray_ids = set(gray_queue_ids(queues, gray))

    async def pull() -> list[MessageExt]:
        readers = {side: PullConsumer("GID_STOCK_READER", ns_url, gray=side, register=False) for side in (False, True)}
        try:
            deadline = time.monotonic() + timeout
            while True:
                messages: list[MessageExt] = []
                for queue_id in range(queues):
                    pulled = await readers[queue_id in gray_ids].pull(MessageQueue(topic, broker, queue_id), 0,
                                                                      max_nums=64)
                    messages.extend(pulled.messages)
                if len(messages) >= expected or time.monotonic() > deadline:
                    return messages
                await asyncio.sleep(0.2)
        finally:
            for reader in readers.values():
                await reader.stop()

    return asyncio.run(pull())
