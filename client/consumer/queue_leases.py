"""The queue leases a clustering consumer holds on the brokers, taken before it pulls a queue and handed back
with the queue's final offset, so the next owner starts exactly where this one stopped.

A queue held by another client is not taken: its owner releases it once it has finished and committed
what it pulled (the broker then tells the group, which rebalances), or its lease ends with it (its
connection closed, it left the group, or the lease expired).
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict

from graymq.client.message import MessageQueue
from graymq.protocol.broker_client import BrokerClient
from graymq.protocol.errors import GrayMQError

log = logging.getLogger(__name__)


class QueueLeases:
    def __init__(self, brokers: BrokerClient, group: str, client_id: str) -> None:
        self.brokers = brokers
        self.group = group
        self.client_id = client_id
        self.held: dict[MessageQueue, str] = {}  # queue -> broker address, as the brokers granted them
        self.waiting: dict[MessageQueue, str] = {}  # queues wanted but held by another client -> that client

    async def acquire(self, queues: list[tuple[MessageQueue, str]]) -> tuple[set[MessageQueue], list[GrayMQError]]:
        """Take the leases of ``queues`` (queue, broker address): the queues now held, and the errors of brokers
        that did not answer (their queues are not held)."""
        by_address: dict[str, list[MessageQueue]] = defaultdict(list)
        for mq, address in queues:
            by_address[address].append(mq)
        answers = await asyncio.gather(*(
            self.brokers.lock_queues(address, self.group, self.client_id, [(mq.topic, mq.queue_id) for mq in mqs])
            for address, mqs in by_address.items()), return_exceptions=True)
        acquired: set[MessageQueue] = set()
        errors: list[GrayMQError] = []
        for (address, mqs), answer in zip(by_address.items(), answers, strict=True):
            if isinstance(answer, GrayMQError):
                errors.append(answer)
                continue
            if isinstance(answer, BaseException):
                raise answer
            named = {(mq.topic, mq.queue_id): mq for mq in mqs}
            for ref in answer.locked:
                mq = named[(ref.topic, ref.queue_id)]
                self.held[mq] = address
                self.waiting.pop(mq, None)
                acquired.add(mq)
            for owner in answer.held:
                self.waiting[named[(owner.topic, owner.queue_id)]] = owner.client_id
        return acquired, errors

    async def release(self, mq: MessageQueue, offset: int) -> bool:
        """Commit ``offset`` (-1: none) and release ``mq``; False when its broker could not be told (the lease
        then ends with this client's connection or expires)."""
        address = self.held.pop(mq, None)
        if address is None:
            return True
        try:
            await self.brokers.unlock_queues(address, self.group, self.client_id, [(mq.topic, mq.queue_id, offset)])
        except GrayMQError as exc:
            log.warning("releasing %s on %s failed: %s (%s); its lease ends when it expires", mq, address,
                        exc.message, exc.code_name)
            return False
        return True

    def forget(self, mq: MessageQueue) -> None:
        """The broker says another client holds ``mq`` now: this one's lease is gone."""
        self.held.pop(mq, None)
