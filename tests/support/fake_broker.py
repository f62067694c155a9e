"""A broker double on loopback: real sockets and frames, canned records, faults on demand.

It registers with a real name server like a broker (so routes point at it) and answers the
calls consumers make from memory. Tests use it to serve what the real broker refuses to serve
(a damaged record) and to inject errors (``fail``: method name -> the error it answers with).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field

import httpx

from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.connection import Connection, FrameProtocol, listen
from graymq.protocol.errors import GrayMQError
from graymq.protocol.record import encode_properties, encode_record, make_properties
from graymq.protocol.remoting import parse_body, response_envelope

HOLD_S = 0.2  # a pull that finds nothing is answered after this long (a short long-poll)


def record(topic: str, queue_id: int, queue_offset: int, body: bytes, *, damaged: bool = False) -> bytes:
    """One stored record with msg id ``M<offset>``; ``damaged``: its body's last byte flipped (CRC mismatch)."""
    properties = encode_properties(make_properties(tags="T", msg_id=f"M{queue_offset}"))
    data = bytearray(encode_record(
        topic=topic.encode(), body=body, queue_id=queue_id, queue_offset=queue_offset,
        physical_offset=queue_offset * 1000, born_host=b"127.0.0.1:1", store_host=b"127.0.0.1:2",
        properties=properties,
    ))
    if damaged:
        data[-len(properties) - 1] ^= 0xFF
    return bytes(data)


@dataclass
class FakeBroker:
    """``queues[queue_id]`` holds the records at offsets 0, 1, ...; ``offsets`` the committed ones."""

    name: str
    topic: str
    queue_nums: int = 1
    queues: dict[int, list[bytes]] = field(default_factory=dict)
    offsets: dict[tuple[str, str, int], int] = field(default_factory=dict)
    fail: dict[str, GrayMQError] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    clients: dict[str, pb.ClientInfo] = field(default_factory=dict)
    address: str = ""
    _server: asyncio.Server | None = None
    _register_task: asyncio.Task[None] | None = None
    _connections: list[Connection] = field(default_factory=list)

    async def start(self, ns_url: str) -> None:
        """Listen on a free loopback port and register with the name server until ``stop``."""
        self._server = await listen("127.0.0.1", 0, self._accept)
        self.address = f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        self._register_task = asyncio.get_running_loop().create_task(self._register(ns_url.split(",")[0]))
        deadline = time.monotonic() + 20
        async with httpx.AsyncClient(timeout=5) as http:
            while True:
                route = await http.get(f"{ns_url.split(',')[0]}/v1/topics/{self.topic}/route")
                if route.status_code == 200 and any(b["address"] == self.address for b in route.json()["brokers"]):
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the name server does not route {self.topic} to {self.name}")
                await asyncio.sleep(0.1)

    async def stop(self) -> None:
        if self._register_task is not None:
            self._register_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._register_task
        for conn in self._connections:
            await conn.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _register(self, ns_url: str) -> None:
        body = {"broker_name": self.name, "address": self.address,
                "topics": [{"topic": self.topic, "queue_nums": self.queue_nums, "gray_queue_nums": 0, "perm": 6}]}
        async with httpx.AsyncClient(timeout=5) as http:
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    await http.post(f"{ns_url}/v1/brokers/heartbeat", json=body)
                await asyncio.sleep(0.5)

    def _accept(self, transport: asyncio.Transport, protocol: FrameProtocol) -> None:
        self._connections.append(Connection(transport, protocol, self._handle))

    def _handle(self, conn: Connection, envelope: pb.Envelope) -> bytes | Awaitable[bytes]:
        req = parse_body(envelope, response=False)
        method = envelope.method
        self.calls.append(pb.Method.Name(method))
        if (error := self.fail.get(pb.Method.Name(method))) is not None:
            raise error
        if method == pb.HEARTBEAT:
            for data in req.consumers:  # type: ignore[attr-defined]
                client_id = data.client_id or req.client_id  # type: ignore[attr-defined]  # as the broker's
                self.clients[client_id] = pb.ClientInfo(
                    client_id=client_id, gray_flag=data.gray_flag,
                    last_heartbeat_ms=int(time.time() * 1000), topics=[s.topic for s in data.subscriptions])
            return response_envelope(method, pb.HeartbeatResponse(broker_time_ms=int(time.time() * 1000)))
        if method == pb.UNREGISTER_CLIENT:
            self.clients.pop(req.client_id, None)  # type: ignore[attr-defined]
            return response_envelope(method)
        if method == pb.GET_CONSUMER_LIST:
            return response_envelope(method, pb.ConsumerListResponse(clients=list(self.clients.values())))
        if method == pb.QUERY_CONSUMER_OFFSET:
            key = (req.consumer_group, req.topic, req.queue_id)  # type: ignore[attr-defined]
            return response_envelope(method, pb.QueryConsumerOffsetResponse(offset=self.offsets.get(key, -1)))
        if method == pb.UPDATE_CONSUMER_OFFSET:
            self.offsets[(req.consumer_group, req.topic, req.queue_id)] = req.offset  # type: ignore[attr-defined]
            return response_envelope(method)
        if method in (pb.GET_MIN_OFFSET, pb.SEARCH_OFFSET_BY_TIME):
            return response_envelope(method, pb.OffsetResponse(offset=0))
        if method == pb.GET_MAX_OFFSET:
            return response_envelope(method, pb.OffsetResponse(offset=len(self.queues.get(req.queue_id, []))))  # type: ignore[attr-defined]
        if method == pb.GET_GROUP_BACKLOG:
            return response_envelope(method, pb.GroupBacklogResponse(queues=[
                pb.QueueBacklog(topic=t, queue_id=q, consumer_offset=o) for (g, t, q), o in self.offsets.items()
                if g == req.consumer_group]))  # type: ignore[attr-defined]
        if method == pb.CONSUMER_SEND_BACK:
            return response_envelope(method)
        if method == pb.LOCK_QUEUES:  # every lease granted: one consumer at a time in these tests
            return response_envelope(method, pb.LockQueuesResponse(locked=req.queues))  # type: ignore[attr-defined]
        if method == pb.UNLOCK_QUEUES:
            for q in req.queues:  # type: ignore[attr-defined]
                if q.offset >= 0:
                    self.offsets[(req.consumer_group, q.topic, q.queue_id)] = q.offset  # type: ignore[attr-defined]
            return response_envelope(method)
        if method == pb.PULL_MESSAGE:
            return self._pull(req)  # type: ignore[arg-type]
        raise GrayMQError(f"the fake broker does not answer {pb.Method.Name(method)}")

    def _pull(self, req: pb.PullRequest) -> bytes | Awaitable[bytes]:
        if req.commit_offset >= 0:
            self.offsets[(req.consumer_group, req.topic, req.queue_id)] = req.commit_offset
        stored = self.queues.get(req.queue_id, [])
        found = stored[req.queue_offset : req.queue_offset + max(1, req.max_msg_nums)]
        response = pb.PullResponse(
            status=pb.FOUND if found else pb.NO_NEW_MSG, next_begin_offset=req.queue_offset + len(found),
            min_offset=0, max_offset=len(stored), records=b"".join(found), record_count=len(found))
        if found or not req.suspend_timeout_ms:
            return response_envelope(pb.PULL_MESSAGE, response)

        async def held() -> bytes:
            await asyncio.sleep(min(HOLD_S, req.suspend_timeout_ms / 1000))
            return response_envelope(pb.PULL_MESSAGE, response)

        return held()
