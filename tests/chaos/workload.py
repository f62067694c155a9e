"""The chaos workload: producers and consumers of one release pair (v1 normal, v2 gray) that record every acked
send and every consumption, run with the client library in the test's event loop against real brokers.

Producers send at a bounded rate for a bounded time and count; every other message carries a sharding key
(ordered). Consumers are orderly push consumers labelled ``version=v1|v2``; a gray rule on ``version=v2`` makes
the v2 side gray. A failed send (the broker down or stalled) is counted as an attempt, never as acked.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator

from graymq.client import ConsumeStatus, Message, MessageExt, Producer, PushConsumer
from graymq.protocol.errors import GrayMQError
from tests.chaos.checkers import Consumed, Sent

FAST = dict(rebalance_interval_s=1.0, heartbeat_interval_s=0.5, nameserver_interval_s=0.3, long_poll_s=1.0,
            persist_interval_s=0.2, drain_poll_s=0.1)
ORDER_KEYS = 8
STOP_TIMEOUT_S = 20.0


class Workload:
    """Records of one case: ``sent`` (acked sends), ``consumed`` (listener calls, in order), ``attempts``."""

    def __init__(self, nameserver: str, topic: str, group: str) -> None:
        self.nameserver = nameserver
        self.topic = topic
        self.group = group
        self.sent: list[Sent] = []
        self.consumed: list[Consumed] = []
        self.attempts = 0
        self.failed_sends = 0
        self.consumers: list[PushConsumer] = []

    # -- consuming ---------------------------------------------------------------------------
    def _listener(self, client_id: str, version: str) -> Callable[[list[MessageExt]], object]:
        async def on_messages(messages: list[MessageExt]) -> ConsumeStatus:
            now = time.monotonic()
            for m in messages:
                self.consumed.append(Consumed(m.msg_id, client_id, version, m.topic, m.broker_name, m.queue_id,
                                              m.queue_offset, m.gray, now))
            return ConsumeStatus.CONSUME_SUCCESS

        return on_messages

    async def start_consumer(self, client_id: str, version: str) -> PushConsumer:
        """An orderly consumer of the topic from its first message, labelled ``version``."""
        consumer = PushConsumer(self.group, self.nameserver, listener=self._listener(client_id, version),
                                client_id=client_id, labels={"version": version}, consume_from="first", orderly=True,
                                **FAST)  # type: ignore[arg-type]
        consumer.subscribe(self.topic, "*")
        await asyncio.wait_for(consumer.start(), STOP_TIMEOUT_S)
        self.consumers.append(consumer)
        return consumer

    async def stop_consumers(self) -> None:
        consumers, self.consumers = self.consumers, []
        await asyncio.gather(*(asyncio.wait_for(c.stop(grace_s=2.0), STOP_TIMEOUT_S) for c in consumers),
                             return_exceptions=True)

    def consumed_ids(self) -> set[str]:
        return {c.msg_id for c in self.consumed}

    async def wait_consumed(self, expected: set[str], timeout: float) -> bool:
        """Poll until every id of ``expected`` was consumed or ``timeout`` passed; whether they all were."""
        deadline = time.monotonic() + timeout
        while not expected <= self.consumed_ids():
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.1)
        return True

    # -- producing ---------------------------------------------------------------------------
    async def produce(self, client_id: str, version: str, duration_s: float, max_count: int,
                      interval_s: float = 0.01, in_flight: int = 1) -> None:
        """Send for ``duration_s`` or ``max_count`` messages, whichever ends first: ``in_flight`` senders sharing
        one producer, each sending one message at a time (so up to ``in_flight`` sends wait at once)."""
        producer = Producer(self.group, self.nameserver, client_id=client_id, labels={"version": version},
                            send_timeout_s=3.0, heartbeat_interval_s=0.5)
        await asyncio.wait_for(producer.start(), STOP_TIMEOUT_S)
        try:
            numbers = iter(range(max_count))  # shared: each number is sent once, by whichever sender takes it
            deadline = time.monotonic() + duration_s
            await asyncio.gather(*(self._sender(producer, client_id, version, numbers, deadline, interval_s)
                                   for _ in range(in_flight)))
        finally:
            await asyncio.wait_for(producer.stop(), STOP_TIMEOUT_S)

    async def _sender(self, producer: Producer, client_id: str, version: str, numbers: Iterator[int],
                      deadline: float, interval_s: float) -> None:
        for n in numbers:
            if time.monotonic() >= deadline:
                return
            key = f"{version}-k{n % ORDER_KEYS}" if n % 2 else None
            self.attempts += 1
            began = time.monotonic()
            try:
                r = await producer.send(Message(self.topic, f"{client_id}#{n}".encode().ljust(96, b"."),
                                                sharding_key=key))
            except (GrayMQError, OSError, TimeoutError):
                self.failed_sends += 1
                await asyncio.sleep(0.05)
                continue
            self.sent.append(Sent(r.msg_id, r.queue.topic, r.queue.broker_name, r.queue.queue_id, r.queue_offset,
                                  r.gray, key, r.commit_log_offset, began, time.monotonic()))
            await asyncio.sleep(interval_s)
