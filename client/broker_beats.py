"""The broker heartbeats of a ``ClientInstance``'s consumers, one request per broker (RocketMQ's one
``HeartbeatData`` per process): the consumers' data due in one turn of the loop go to each broker in one
``HeartbeatRequest``, each ``ConsumerData`` naming its consumer (``client_id``), and every consumer hears how its
request went. The consumers beat on one grid of their interval, so an idle instance sends one heartbeat per broker
and interval whatever its number of consumers.

A consumer leaving a broker (``unregister``) waits for a heartbeat of its own on the way there: one landing after
would register it again.
"""

from __future__ import annotations

import asyncio

from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.broker_client import BrokerClient

Pending = tuple[pb.ConsumerData, asyncio.Future[None]]


class BrokerBeats:
    """Heartbeats to the brokers over ``brokers``, batched per broker; the request names ``client_id`` (the
    instance)."""

    def __init__(self, brokers: BrokerClient, client_id: str) -> None:
        self.brokers = brokers
        self.client_id = client_id
        self.requests = 0  # heartbeat requests sent
        self._pending: dict[str, list[Pending]] = {}  # broker address -> data waiting for the next request
        self._senders: dict[str, asyncio.Task[None]] = {}
        self._in_flight: dict[str, set[tuple[str, str]]] = {}  # address -> (group, client id) of the request out
        self._landed = asyncio.Condition()  # notified when a request came back

    async def heartbeat(self, address: str, data: pb.ConsumerData) -> None:
        """Heartbeat ``data`` (its ``client_id`` set) to the broker at ``address`` with the other consumers' of this
        turn of the loop; raises what the request raised."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._pending.setdefault(address, []).append((data, future))
        if address not in self._senders:
            self._senders[address] = loop.create_task(self._send(address), name=f"heartbeats to {address}")
        await future

    async def unregister(self, address: str, client_id: str, group: str) -> None:
        """Take ``client_id`` out of ``group`` on the broker, once no heartbeat of it is on its way there."""
        async with self._landed:
            await self._landed.wait_for(lambda: (group, client_id) not in self._in_flight.get(address, ()))
        await self.brokers.unregister(address, client_id, group)

    async def close(self) -> None:
        for task in list(self._senders.values()):
            task.cancel()
        await asyncio.gather(*self._senders.values(), return_exceptions=True)
        for pending in self._pending.values():
            for _, future in pending:
                future.cancel()

    async def _send(self, address: str) -> None:
        try:
            await asyncio.sleep(0)  # the rest of this turn's heartbeats join
            while batch := [(d, f) for d, f in self._pending.pop(address, []) if not f.done()]:
                self._in_flight[address] = {(d.group, d.client_id) for d, _ in batch}
                try:
                    await self._send_batch(address, batch)
                finally:
                    del self._in_flight[address]
                    async with self._landed:
                        self._landed.notify_all()
        finally:
            del self._senders[address]

    async def _send_batch(self, address: str, batch: list[Pending]) -> None:
        request = pb.HeartbeatRequest(client_id=self.client_id, consumers=[data for data, _ in batch])
        try:
            await self.brokers.heartbeat(address, request)
        except Exception as exc:  # noqa: BLE001 - handed to every consumer of the request, each deals with it
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        self.requests += 1
        for _, future in batch:
            if not future.done():
                future.set_result(None)
