"""The assignment table of a push consumer: the queues it holds (their ``ProcessQueue``), the listener batches
running, and where it stopped on queues it could not hand back (their broker was unreachable)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from graymq.client.consumer.process_queue import ProcessQueue, Stop
from graymq.client.message import MessageQueue

Wanted = dict[MessageQueue, tuple[str, bool]]  # queue -> (broker address, held by adoption)


class Assignment:
    """Queue → ``ProcessQueue`` of the queues held; no I/O, the rebalancer and the fetcher change it.

    >>> from graymq.client.message import MessageQueue
    >>> table, mq = Assignment(), MessageQueue("T", "b", 0)
    >>> table.add(ProcessQueue(mq, "addr", 5)); table.assigned()
    [MessageQueue(topic='T', broker_name='b', queue_id=0)]
    >>> [pq.mq.queue_id for pq in table.stale({mq: ("elsewhere", False)})]
    [0]
    """

    def __init__(self) -> None:
        self.queues: dict[MessageQueue, ProcessQueue] = {}
        self.consuming: set[asyncio.Task[None]] = set()  # listener batches running, of every queue
        self.unreleased: dict[MessageQueue, Stop] = {}  # queue given up unreleased -> where this client stopped

    def __contains__(self, mq: object) -> bool:
        return mq in self.queues

    def __iter__(self) -> Iterator[ProcessQueue]:
        return iter(list(self.queues.values()))

    def assigned(self) -> list[MessageQueue]:
        return sorted(self.queues)

    def snapshot(self) -> dict[MessageQueue, ProcessQueue]:
        return dict(self.queues)

    def add(self, pq: ProcessQueue) -> None:
        self.queues[pq.mq] = pq

    def drop(self, pq: ProcessQueue) -> None:
        """Stop ``pq`` (its pull loop and batches see ``dropped``) and take it out of the table."""
        pq.dropped, mq = True, pq.mq
        if self.queues.get(mq) is pq:
            del self.queues[mq]

    def stale(self, wanted: Wanted) -> list[ProcessQueue]:
        """The queues held that are not wanted, or wanted from another broker or another way (adopted or not)."""
        return [pq for mq, pq in self.queues.items() if wanted.get(mq) != (pq.address, pq.adopted)]

    def new(self, wanted: Wanted) -> list[tuple[MessageQueue, str, bool]]:
        """The wanted queues not held yet: (queue, broker address, adopted)."""
        return [(mq, address, adopted) for mq, (address, adopted) in wanted.items() if mq not in self.queues]

    def track(self, pq: ProcessQueue, batch: asyncio.Task[None]) -> None:
        self.consuming.add(batch)
        pq.consuming.add(batch)

    def finished(self, pq: ProcessQueue, batch: asyncio.Task[None]) -> None:
        self.consuming.discard(batch)
        pq.consuming.discard(batch)

    async def abandon_batches(self) -> None:
        """Cancel the batches still running (the consumer stops after its grace period): they stay uncommitted."""
        for task in list(self.consuming):
            task.cancel()
        await asyncio.gather(*self.consuming, return_exceptions=True)
