"""The gRPC port's connections, counted where they are accepted.

gRPC core can cap a server's connections (``grpc.max_allowed_incoming_connections``), but one over the cap is closed
inside the core without a trace: no callback, no counter, no log. So the port is the broker's own: each connection
accepted is piped, byte for byte (TLS included), to the gRPC server listening on loopback, at most
``max_connections`` at once; one more is closed at once, counted (``refused``, the metric
``graymq_broker_grpc_rejected_connections_total``) and logged once per window. gRPC keeps its own deadlines (the
HTTP/2 handshake, idleness) on its side of the pipe: a connection it closes is closed here. gRPC sees each connection
as coming from loopback; ``peer`` names the client's address for the budgets and logs, as gRPC formats a peer.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable
from typing import cast

from graymq.protocol.retry import ThrottledLog

log = logging.getLogger(__name__)

INNER_HOST = "127.0.0.1"


def grpc_peer(address: tuple[str, int] | tuple[str, int, int, int]) -> str:
    """A TCP socket's address as gRPC names a peer.

    >>> grpc_peer(("10.0.0.7", 51000)), grpc_peer(("::1", 51000, 0, 0))
    ('ipv4:10.0.0.7:51000', 'ipv6:[::1]:51000')
    """
    host, port = address[0], address[1]
    return f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}"


class _Pipe(asyncio.Protocol):
    """One side of a piped connection: what it reads is written to ``other``; a full ``other`` pauses it."""

    def __init__(self, closed: Callable[[], None] = lambda: None) -> None:
        self.transport: asyncio.Transport | None = None
        self.other: _Pipe | None = None
        self.held: list[bytes] = []  # read before ``other`` was connected
        self.closed = closed

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not asyncio.Transport instances

    def data_received(self, data: bytes) -> None:
        if self.other is not None and self.other.transport is not None:
            self.other.transport.write(data)
        else:
            self.held.append(data)

    def eof_received(self) -> bool:
        """One side's end closes the pipe (HTTP/2 has no use for half a connection): gRPC ending a connection it
        closed at its deadline frees the client's place at once, though the client stays silent."""
        if self.other is not None and self.other.transport is not None:
            self.other.transport.close()  # what was written to it goes first
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self.other is not None and self.other.transport is not None:
            self.other.transport.close()
        self.closed()

    def pause_writing(self) -> None:
        if self.other is not None and self.other.transport is not None:
            self.other.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.other is not None and self.other.transport is not None:
            self.other.transport.resume_reading()

    def join(self, other: _Pipe) -> None:
        """Pipe both ways; what was held goes first."""
        self.other, other.other = other, self
        for side in (self, other):
            assert side.other is not None and side.other.transport is not None
            for data in side.held:
                side.other.transport.write(data)
            side.held.clear()


class _Accepted(_Pipe):
    """A client's side of a pipe, admitted by its front door as it connects."""

    def __init__(self, door: FrontDoor) -> None:
        super().__init__()
        self.door = door

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.door.admit(self)


class FrontDoor:
    """``await start(host, port, inner_port)`` → the bound port; ``peer(grpc_peer)``; ``await stop()``.
    ``on_refused()`` hears of each connection refused over ``max_connections``."""

    def __init__(self, max_connections: int, on_refused: Callable[[], None] = lambda: None) -> None:
        self.max_connections = max_connections
        self.on_refused = on_refused
        self.refused = 0
        self._pipes: set[_Pipe] = set()  # the clients' sides of the pipes open
        self._peers: dict[int, str] = {}  # the loopback port of a pipe's gRPC side -> its client, as gRPC names it
        self._server: asyncio.Server | None = None
        self._inner_port = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._log = ThrottledLog(log, 30.0)

    async def start(self, host: str, port: int, inner_port: int) -> int:
        self._inner_port = inner_port
        self._server = await asyncio.get_running_loop().create_server(lambda: _Accepted(self), host, port)
        return int(self._server.sockets[0].getsockname()[1])

    def close(self) -> None:
        """Accept no more connections (the piped ones go on until ``stop``)."""
        if self._server is not None:
            self._server.close()

    async def stop(self) -> None:
        """Close the listener and every pipe left (call after the gRPC server's graceful stop)."""
        self.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for pipe in list(self._pipes):
            if pipe.transport is not None:
                pipe.transport.abort()
        if self._server is not None:
            await self._server.wait_closed()

    @property
    def open(self) -> int:
        return len(self._pipes)

    def peer(self, seen_by_grpc: str) -> str:
        """The client behind a peer gRPC names (``ipv4:127.0.0.1:PORT``); any other peer as it is."""
        host, _, port = seen_by_grpc.rpartition(":")
        return self._peers.get(int(port), seen_by_grpc) if host == f"ipv4:{INNER_HOST}" and port.isdigit() \
            else seen_by_grpc

    def admit(self, outer: _Pipe) -> None:
        """Pipe ``outer`` to the gRPC server, or close it at once over ``max_connections`` (counted, logged)."""
        assert outer.transport is not None
        peer = grpc_peer(outer.transport.get_extra_info("peername"))
        if self.open >= self.max_connections:
            self.refused += 1
            self.on_refused()
            self._log.log(logging.WARNING, "max_connections", "refusing a gRPC connection from %s: %d connections "
                          "open (GRAYMQ_BROKER_GRPC_MAX_CONNECTIONS; %d refused so far)", peer, self.open,
                          self.refused)
            outer.transport.abort()
            return
        self._pipes.add(outer)

        def closed() -> None:
            self._pipes.discard(outer)

        outer.closed = closed
        outer.transport.pause_reading()
        task = asyncio.get_running_loop().create_task(self._connect(outer, peer), name=f"gRPC pipe {peer}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _connect(self, outer: _Pipe, peer: str) -> None:
        """The gRPC side of ``outer``'s pipe; ``outer`` closed when the gRPC server cannot be reached."""
        assert outer.transport is not None
        inner = _Pipe()
        try:
            transport, _ = await asyncio.get_running_loop().create_connection(lambda: inner, INNER_HOST,
                                                                              self._inner_port)
        except OSError as exc:
            log.warning("the gRPC server on loopback port %d refused a connection from %s: %s", self._inner_port,
                        peer, exc)
            outer.transport.abort()
            return
        if outer.transport.is_closing():  # the client left meanwhile
            transport.close()
            return
        sock = transport.get_extra_info("socket")
        local_port = int(sock.getsockname()[1]) if sock is not None else 0
        self._peers[local_port] = peer

        def forget() -> None:
            self._peers.pop(local_port, None)

        inner.closed = forget
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        outer.join(inner)
        outer.transport.resume_reading()
