"""Connections to brokers, keyed by address, and the typed broker calls clients make."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Awaitable, Callable
from typing import TypeVar, cast

from google.protobuf.message import Message as PbMessage

from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.connection import Connection
from graymq.protocol.errors import BadRequestError
from graymq.protocol.tls import broker_tls

_T = TypeVar("_T", bound=PbMessage)
log = logging.getLogger(__name__)


def split_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise BadRequestError(f"broker address {address!r} is not host:port")
    return host, int(port)


class BrokerClient:
    """Lazily connects, reconnects after a close, and routes broker pushes to ``on_group_changed``;
    ``on_reconnected(address)`` hears of each new connection to an address that had one before (the broker forgot
    what the old one registered).

    Each new connection authenticates first with ``token`` (the caller's: a client's ``ClientConfig.token``, a
    broker's own replica token; none sent when empty, enough for a broker in dev mode). ``tls`` is the context for
    TLS to brokers (default from ``GRAYMQ_TLS`` / ``GRAYMQ_TLS_CA``, protocol/tls.py); ``False`` forces plain TCP.
    """

    def __init__(self, on_group_changed: Callable[[str], None] | None = None, timeout_s: float = 5.0, *,
                 token: str | None = None, tls: ssl.SSLContext | bool | None = None,
                 on_reconnected: Callable[[str], None] | None = None) -> None:
        self._connections: dict[str, Connection] = {}
        self._on_reconnected = on_reconnected
        self._locks: dict[str, asyncio.Lock] = {}
        self._on_group_changed = on_group_changed
        self.timeout_s = timeout_s
        self.token = (token or "").strip()
        self.tls = tls if isinstance(tls, ssl.SSLContext) else broker_tls(tls)

    async def connection(self, address: str) -> Connection:
        conn = self._connections.get(address)
        if conn is not None and not conn.is_closed:
            return conn
        lock = self._locks.setdefault(address, asyncio.Lock())
        async with lock:
            conn = self._connections.get(address)
            if conn is None or conn.is_closed:
                was_open = conn is not None
                conn = await self._open(address)
                self._connections[address] = conn
                if was_open and self._on_reconnected is not None:
                    try:
                        self._on_reconnected(address)
                    except Exception:  # the caller's request goes on; the listener's fault is only logged
                        log.exception("acting on the new connection to %s failed", address)
        return conn

    async def _open(self, address: str) -> Connection:
        """A new connection, authenticated when there is a token (closed again if that fails)."""
        host, port = split_address(address)
        conn = await Connection.open(host, port, self._on_push, timeout=self.timeout_s, tls=self.tls)
        if self.token:
            try:
                await conn.request(pb.AUTHENTICATE, pb.AuthenticateRequest(token=self.token), self.timeout_s)
            except BaseException:
                await conn.close()
                raise
        return conn

    def _on_push(self, conn: Connection, envelope: pb.Envelope) -> None:
        if envelope.method == pb.NOTIFY_GROUP_CHANGED and self._on_group_changed is not None:
            notice = pb.GroupChangedNotice.FromString(envelope.body)
            self._on_group_changed(notice.consumer_group)

    def call(self, address: str, method: int, body: PbMessage, response_type: type[_T],
             timeout_s: float | None = None) -> Awaitable[_T]:
        """The response, awaited. Connected (every send's case), this is the connection's own request: no
        coroutine of ours in between."""
        conn = self._connections.get(address)
        if conn is not None and not conn.is_closed:
            return cast(Awaitable[_T], conn.request(method, body, timeout_s or self.timeout_s))
        return self._connect_and_call(address, method, body, response_type, timeout_s)

    async def _connect_and_call(self, address: str, method: int, body: PbMessage, response_type: type[_T],
                                timeout_s: float | None) -> _T:
        conn = await self.connection(address)
        return cast(_T, await conn.request(method, body, timeout_s or self.timeout_s))

    async def close(self) -> None:
        for conn in list(self._connections.values()):
            await conn.close()
        self._connections.clear()

    # -- typed calls -----------------------------------------------------------------------
    def send(self, address: str, req: pb.SendRequest, timeout_s: float | None = None) -> Awaitable[pb.SendResponse]:
        return self.call(address, pb.SEND_MESSAGE, req, pb.SendResponse, timeout_s)

    def send_batch(self, address: str, req: pb.SendBatchRequest,
                   timeout_s: float | None = None) -> Awaitable[pb.SendBatchResponse]:
        return self.call(address, pb.SEND_BATCH, req, pb.SendBatchResponse, timeout_s)

    async def pull(self, address: str, req: pb.PullRequest) -> pb.PullResponse:
        timeout = req.suspend_timeout_ms / 1000 + self.timeout_s
        return await self.call(address, pb.PULL_MESSAGE, req, pb.PullResponse, timeout)

    async def heartbeat(self, address: str, req: pb.HeartbeatRequest) -> pb.HeartbeatResponse:
        return await self.call(address, pb.HEARTBEAT, req, pb.HeartbeatResponse)

    async def unregister(self, address: str, client_id: str, group: str) -> None:
        req = pb.UnregisterRequest(client_id=client_id, consumer_group=group)
        await self.call(address, pb.UNREGISTER_CLIENT, req, pb.Empty)

    async def query_offset(self, address: str, group: str, topic: str, queue_id: int) -> int:
        req = pb.QueryConsumerOffsetRequest(consumer_group=group, topic=topic, queue_id=queue_id)
        return (await self.call(address, pb.QUERY_CONSUMER_OFFSET, req, pb.QueryConsumerOffsetResponse)).offset

    async def update_offset(self, address: str, group: str, topic: str, queue_id: int, offset: int,
                            client_id: str = "") -> None:
        """Commit ``offset``; with ``client_id`` (a consumer's commit) refused while another client holds the queue."""
        req = pb.UpdateConsumerOffsetRequest(consumer_group=group, topic=topic, queue_id=queue_id, offset=offset,
                                             client_id=client_id)
        await self.call(address, pb.UPDATE_CONSUMER_OFFSET, req, pb.Empty)

    async def lock_queues(self, address: str, group: str, client_id: str,
                          queues: list[tuple[str, int]]) -> pb.LockQueuesResponse:
        req = pb.LockQueuesRequest(consumer_group=group, client_id=client_id,
                                   queues=[pb.QueueRef(topic=t, queue_id=q, offset=-1) for t, q in queues])
        return await self.call(address, pb.LOCK_QUEUES, req, pb.LockQueuesResponse)

    async def unlock_queues(self, address: str, group: str, client_id: str,
                            queues: list[tuple[str, int, int]]) -> None:
        """Commit each (topic, queue, offset) (offset -1: none) and release the queue's lease."""
        req = pb.UnlockQueuesRequest(consumer_group=group, client_id=client_id,
                                     queues=[pb.QueueRef(topic=t, queue_id=q, offset=o) for t, q, o in queues])
        await self.call(address, pb.UNLOCK_QUEUES, req, pb.Empty)

    async def min_offset(self, address: str, topic: str, queue_id: int) -> int:
        req = pb.QueueRequest(topic=topic, queue_id=queue_id)
        return (await self.call(address, pb.GET_MIN_OFFSET, req, pb.OffsetResponse)).offset

    async def max_offset(self, address: str, topic: str, queue_id: int) -> int:
        req = pb.QueueRequest(topic=topic, queue_id=queue_id)
        return (await self.call(address, pb.GET_MAX_OFFSET, req, pb.OffsetResponse)).offset

    async def search_offset(self, address: str, topic: str, queue_id: int, timestamp_ms: int) -> int:
        req = pb.SearchOffsetRequest(topic=topic, queue_id=queue_id, timestamp_ms=timestamp_ms)
        return (await self.call(address, pb.SEARCH_OFFSET_BY_TIME, req, pb.OffsetResponse)).offset

    async def consumer_list(self, address: str, group: str) -> pb.ConsumerListResponse:
        req = pb.ConsumerListRequest(consumer_group=group)
        return await self.call(address, pb.GET_CONSUMER_LIST, req, pb.ConsumerListResponse)

    async def send_back(self, address: str, req: pb.SendBackRequest) -> None:
        await self.call(address, pb.CONSUMER_SEND_BACK, req, pb.Empty)

    async def group_backlog(self, address: str, group: str, topic: str = "") -> list[pb.QueueBacklog]:
        req = pb.GroupBacklogRequest(consumer_group=group, topic=topic)
        return list((await self.call(address, pb.GET_GROUP_BACKLOG, req, pb.GroupBacklogResponse)).queues)

    async def update_topic(self, address: str, config: pb.TopicConfig) -> None:
        await self.call(address, pb.UPDATE_TOPIC, pb.UpdateTopicRequest(config=config), pb.Empty)
