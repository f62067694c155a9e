"""The broker heartbeats of a ``ClientInstance``'s consumers, one request per broker (RocketMQ's one
``HeartbeatData`` per process): the consumers' data due in one turn of the loop go to each broker in one
``HeartbeatRequest``, each ``ConsumerData`` naming its consumer (``client_id``), and every consumer hears how its
request went. The consumers beat on one grid of their interval, so an idle instance sends one heartbeat per broker
and interval whatever its number of consumers.

A consumer leaving a broker (``unregister``) waits for a heartbeat of its own on the way there: one landing after
would register it again.

Each broker's answer names how long it keeps a consumer that stopped beating and a queue lease not renewed; the
consumers beat at least four times within the shorter (``interval_s``), whatever their configured interval. A
broker drops the consumers of a connection that closed: when a new connection to it opens (``reconnected``), the
last heartbeat of each consumer there goes again at once rather than at its next interval.
"""

from __future__ import annotations

import asyncio
import logging
import time

from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.broker_client import BrokerClient

log = logging.getLogger(__name__)

Pending = tuple[pb.ConsumerData, asyncio.Future[None]]
Member = tuple[str, str]  # (group, consumer's client id)
# heartbeats within a broker's client expiry or queue lease, whichever is shorter: a lease survives two failed or
# late beats in a row (a consumer whose pulls pause, a full queue or an orderly listener at work, renews it by
# heartbeats alone)
BEATS_PER_LIMIT = 4


class BrokerBeats:
    """Heartbeats to the brokers over ``brokers``, batched per broker; the request names ``client_id`` (the
    instance)."""

    def __init__(self, brokers: BrokerClient, client_id: str) -> None:
        self.brokers = brokers
        self.client_id = client_id
        self.requests = 0  # heartbeat requests sent
        self._pending: dict[str, list[Pending]] = {}  # broker address -> data waiting for the next request
        self._senders: dict[str, asyncio.Task[None]] = {}
        self._in_flight: dict[str, set[Member]] = {}  # address -> the members of the request out
        self._landed = asyncio.Condition()  # notified when a request came back
        self._limits: dict[str, float] = {}  # address -> the shorter of its client expiry and queue lease (s)
        # address -> member -> its last heartbeat there, and when it went (monotonic)
        self._last: dict[str, dict[Member, tuple[pb.ConsumerData, float]]] = {}
        self._resends: set[asyncio.Task[None]] = set()

    def interval_s(self, configured_s: float) -> float:
        """The interval between a consumer's heartbeats: ``configured_s``, shorter where a broker's limits ask."""
        return min([configured_s, *(limit / BEATS_PER_LIMIT for limit in self._limits.values())])

    async def heartbeat(self, address: str, data: pb.ConsumerData) -> None:
        """Heartbeat ``data`` (its ``client_id`` set) to the broker at ``address`` with the other consumers' of this
        turn of the loop; raises what the request raised."""
        await self._queue(address, data)

    async def unregister(self, address: str, client_id: str, group: str) -> None:
        """Take ``client_id`` out of ``group`` on the broker, once no heartbeat of it is on its way there."""
        member = (group, client_id)
        self._last.get(address, {}).pop(member, None)
        async with self._landed:
            await self._landed.wait_for(lambda: member not in self._on_their_way(address))
        await self.brokers.unregister(address, client_id, group)

    def reconnected(self, address: str) -> None:
        """A new connection to ``address``: the broker forgot the consumers of the old one, so each one's last
        heartbeat there that would not have expired yet goes again now, but for those already on their way (a
        failure waits for the next interval)."""
        since, going = time.monotonic() - self._limits.get(address, float("inf")), self._on_their_way(address)
        last = self._last.get(address, {})
        for member in [member for member, (_, sent) in last.items() if sent < since]:
            del last[member]  # expired there anyway (or a consumer that no longer beats that broker)
        again = [(data, sent) for member, (data, sent) in last.items() if member not in going]
        if again:
            task = asyncio.get_running_loop().create_task(
                self._resend(address, [self._queue(address, data, sent) for data, sent in again]),
                name=f"heartbeats again to {address}")
            self._resends.add(task)
            task.add_done_callback(self._resends.discard)

    async def _resend(self, address: str, futures: list[asyncio.Future[None]]) -> None:
        results = await asyncio.gather(*futures, return_exceptions=True)
        failed = [r for r in results if isinstance(r, Exception)]
        if failed:
            log.info("heartbeats to %s after reconnecting failed (%s); the next interval beats again", address,
                     failed[0])

    def _queue(self, address: str, data: pb.ConsumerData, sent: float | None = None) -> asyncio.Future[None]:
        """``data`` joins the next request to ``address``; the future says how that request went. ``sent``: when
        the consumer itself sent it (a heartbeat sent again keeps its age)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._last.setdefault(address, {})[(data.group, data.client_id)] = (data, sent or time.monotonic())
        self._pending.setdefault(address, []).append((data, future))
        if address not in self._senders:
            self._senders[address] = loop.create_task(self._send(address), name=f"heartbeats to {address}")
        return future

    def _on_their_way(self, address: str) -> set[Member]:
        """The members with a heartbeat to ``address`` waiting (not cancelled) or out."""
        return self._in_flight.get(address, set()) | {(d.group, d.client_id) for d, f in self._pending.get(address, ())
                                                      if not f.done()}

    async def close(self) -> None:
        tasks = [*self._senders.values(), *self._resends]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
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
                    await self._notify_landed()
        finally:
            del self._senders[address]
            await self._notify_landed()  # heartbeats cancelled while waiting are on their way no more

    async def _notify_landed(self) -> None:
        async with self._landed:
            self._landed.notify_all()

    async def _send_batch(self, address: str, batch: list[Pending]) -> None:
        request = pb.HeartbeatRequest(client_id=self.client_id, consumers=[data for data, _ in batch])
        try:
            answer = await self.brokers.heartbeat(address, request)
        except Exception as exc:  # noqa: BLE001 - handed to every consumer of the request, each deals with it
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        self.requests += 1
        limits = [ms / 1000 for ms in (answer.client_expiry_ms, answer.queue_lease_ms) if ms > 0]
        if limits:
            self._limits[address] = min(limits)
        for _, future in batch:
            if not future.done():
                future.set_result(None)
