"""The broker's TCP server: accepts connections and routes each request to its processor."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from graymq.broker_ext.broker_controller import BrokerController
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.connection import Connection, HandlerResult
from graymq.protocol.errors import ServiceNotAvailableError, UnknownMethodError
from graymq.protocol.remoting import method_name, parse_body

log = logging.getLogger(__name__)


class RemotingServer:
    """``await start()`` binds (port 0 picks a free one); ``address`` is then ``host:port``."""

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self.connections: set[Connection] = set()
        self._server: asyncio.Server | None = None
        self._stopping = False
        b = broker
        # method -> handler(connection, typed request)
        self._routes: dict[int, Callable[[Connection, Any], HandlerResult]] = {
            pb.SEND_MESSAGE: lambda c, r: b.send_processor.send(r),
            pb.SEND_BATCH: lambda c, r: b.send_processor.send_batch(r),
            pb.PULL_MESSAGE: lambda c, r: b.pull_processor.pull(r),
            pb.HEARTBEAT: b.client_processor.heartbeat,
            pb.UNREGISTER_CLIENT: lambda c, r: b.client_processor.unregister(r),
            pb.GET_CONSUMER_LIST: lambda c, r: b.client_processor.consumer_list(r),
            pb.QUERY_CONSUMER_OFFSET: lambda c, r: b.admin_processor.query_offset(r),
            pb.UPDATE_CONSUMER_OFFSET: lambda c, r: b.admin_processor.update_offset(r),
            pb.GET_MIN_OFFSET: lambda c, r: b.admin_processor.min_offset(r),
            pb.GET_MAX_OFFSET: lambda c, r: b.admin_processor.max_offset(r),
            pb.SEARCH_OFFSET_BY_TIME: lambda c, r: b.admin_processor.search_offset(r),
            pb.QUERY_MESSAGE_BY_KEY: lambda c, r: b.admin_processor.query_by_key(r),
            pb.VIEW_MESSAGE_BY_OFFSET: lambda c, r: b.admin_processor.view_by_offset(r),
            pb.UPDATE_TOPIC: lambda c, r: b.admin_processor.update_topic(r),
            pb.GET_TOPIC: lambda c, r: b.admin_processor.get_topic(r),
            pb.GET_GROUP_BACKLOG: lambda c, r: b.admin_processor.group_backlog(r),
            pb.CONSUMER_SEND_BACK: lambda c, r: b.send_back_processor.send_back(r),
        }

    async def start(self, host: str, port: int) -> str:
        self._server = await asyncio.start_server(self._accept, host, port, limit=1 << 20)
        bound = self._server.sockets[0].getsockname()
        return f"{bound[0]}:{bound[1]}"

    async def stop(self) -> None:
        self._stopping = True
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            await conn.close()
        if self._server is not None:
            await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection(reader, writer, self._handle, max_frame_size=self.broker.settings.max_frame_size,
                          on_close=self._closed)
        self.connections.add(conn)
        conn.start()

    def _closed(self, conn: Connection) -> None:
        self.connections.discard(conn)
        self.broker.consumers.connection_closed(conn)
        if conn.close_reason.startswith("protocol error"):
            self.broker.stats.connections_rejected += 1

    def _handle(self, conn: Connection, envelope: pb.Envelope) -> HandlerResult:
        if self._stopping:
            raise ServiceNotAvailableError(f"broker {self.broker.name} is shutting down")
        route = self._routes.get(envelope.method)
        if route is None:
            raise UnknownMethodError(f"the broker does not serve {method_name(envelope.method)}")
        return route(conn, parse_body(envelope, response=False))
