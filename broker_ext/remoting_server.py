"""The broker's TCP server: accepts connections, checks who asks what, routes each request to its processor.

Limits on what a peer can hold: at most ``max_connections`` connections (more are closed at once), of them at
most ``max_unauthenticated_connections`` not authenticated yet, ``max_unauthenticated_per_address`` from one
address (``UnauthenticatedBudget``: a flood of strangers' sockets leaves room for the rightful clients); a
connection that has not authenticated within ``auth_timeout_s`` (outside dev mode; a TLS handshake must end
as soon, dev mode too), or that stays silent
for ``idle_timeout_s`` with nothing in flight, is closed; frames are limited to
``unauthenticated_frame_size`` until the connection authenticates, and partial frames buffered over all
connections to ``max_buffered_bytes``. A failed TLS handshake is logged at WARNING (once a reason every 30
s) and counted in ``graymq_broker_tls_handshake_failures_total``.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from contextlib import suppress

from graymq.broker_ext.broker_controller import BrokerController
from graymq.broker_ext.processors.methods import METHODS
from graymq.broker_ext.security.connection_budget import UnauthenticatedBudget
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.connection import Connection, FrameProtocol, HandlerResult, listen
from graymq.protocol.errors import ServiceNotAvailableError, UnknownMethodError
from graymq.protocol.frame import BufferBudget
from graymq.protocol.remoting import method_name, parse_request
from graymq.protocol.retry import ThrottledLog
from graymq.protocol.tls import LEFT_DURING_HANDSHAKE, report_handshake_failures

log = logging.getLogger(__name__)

SWEEP_S = 1.0  # how often connections are checked against the deadlines
CLOSE_GRACE_S = 5.0  # at shutdown, how long connections may take to close before they are dropped
_UNTRUSTED = "a client that does not trust this broker's certificate: its GRAYMQ_TLS_CA"
_HANDSHAKE_HINTS = {  # what an operator reads in the commonest reasons
    "WRONG_VERSION_NUMBER": "a client speaking plain TCP to the TLS port? it needs GRAYMQ_TLS=true",
    "HTTP_REQUEST": "an HTTP request to the TLS broker port",
    "TLSV1_ALERT_UNKNOWN_CA": _UNTRUSTED,
    "SSLV3_ALERT_CERTIFICATE_UNKNOWN": _UNTRUSTED,
    LEFT_DURING_HANDSHAKE: "the client hung up or stalled before the handshake ended; one that does not trust this "
                           "broker's certificate does so: its GRAYMQ_TLS_CA",
}
_OVER_BUDGET = {  # UnauthenticatedBudget.refusal -> the log's reason
    "per_address": "too many connections from its address not authenticated yet "
                   "(GRAYMQ_BROKER_MAX_UNAUTHENTICATED_PER_ADDRESS)",
    "limit": "too many connections not authenticated yet (GRAYMQ_BROKER_MAX_UNAUTHENTICATED_CONNECTIONS)",
}


class RemotingServer:
    """``await start()`` binds (port 0 picks a free one); ``address`` is then ``host:port``."""

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self.connections: set[Connection] = set()
        self._server: asyncio.Server | None = None
        self._stopping = False
        self._sweeper: asyncio.Task[None] | None = None
        self.budget = BufferBudget(broker.settings.max_buffered_bytes)
        self.unauthenticated = UnauthenticatedBudget(broker.settings.max_unauthenticated_connections,
                                                     broker.settings.max_unauthenticated_per_address)
        self._log = ThrottledLog(log, 30.0)
    async def start(self, host: str, port: int, tls: ssl.SSLContext | None = None) -> str:
        if tls is not None:
            report_handshake_failures(tls, self._handshake_failed)
        self._server = await listen(host, port, self._accept, tls=tls,
                                    tls_handshake_timeout=self.broker.settings.auth_timeout_s)
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep(), name="broker-connection-sweeper")
        bound = self._server.sockets[0].getsockname()
        return f"{bound[0]}:{bound[1]}"

    async def stop(self) -> None:
        self._stopping = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            with suppress(asyncio.CancelledError):
                await self._sweeper
        if self._server is not None:
            self._server.close()
        closing = {asyncio.ensure_future(conn.close()): conn for conn in list(self.connections)}
        if closing:  # side by side, and a peer that does not answer a TLS goodbye is dropped after a grace
            _, late = await asyncio.wait(closing, timeout=CLOSE_GRACE_S)
            for task in late:
                closing[task].abort("closed locally")
            await asyncio.gather(*late, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def _accept(self, transport: asyncio.Transport, protocol: FrameProtocol) -> None:
        settings = self.broker.settings
        if len(self.connections) >= settings.max_connections:
            self.broker.stats.connections_rejected += 1
            self._log.log(logging.WARNING, "max_connections", "refusing a connection from %s: %d connections "
                          "open (GRAYMQ_BROKER_MAX_CONNECTIONS)", transport.get_extra_info("peername"),
                          len(self.connections))
            transport.close()
            return
        peer = transport.get_extra_info("peername")
        address = str(peer[0] if isinstance(peer, tuple) else peer)
        over = None if self.broker.access.dev_mode else self.unauthenticated.refusal(address)
        if over is not None:
            self.broker.stats.connections_rejected += 1
            self.broker.stats.unauthenticated_refused += 1
            self._log.log(logging.WARNING, ("unauthenticated", over), "refusing a connection from %s: %s",
                          address, _OVER_BUDGET[over])
            transport.close()
            return
        conn = Connection(transport, protocol, self._handle, max_frame_size=settings.max_frame_size,
                          on_close=self._closed, budget=self.budget)
        if not self.broker.access.is_authenticated(conn):
            conn.limit_frames(settings.unauthenticated_frame_size)
            self.unauthenticated.add(conn, address)
        self.connections.add(conn)

    def _handshake_failed(self, reason: str) -> None:
        self.broker.stats.tls_handshake_failures += 1
        self._log.log(logging.WARNING, ("tls", reason), "a TLS handshake on the broker port failed: %s (%s)", reason,
                      _HANDSHAKE_HINTS.get(reason, "see the client's own error"))

    async def _sweep(self) -> None:
        """Close connections that never authenticated in time, and idle ones."""
        settings, access = self.broker.settings, self.broker.access
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(min(SWEEP_S, settings.idle_timeout_s / 4, settings.auth_timeout_s / 4))
            now = loop.time()
            for conn in list(self.connections):
                if not access.is_authenticated(conn) and now - conn.opened_at > settings.auth_timeout_s:
                    self.broker.stats.unauthenticated_timed_out += 1
                    self._drop(conn, f"not authenticated within {settings.auth_timeout_s:g} s")
                elif now - conn.last_read > settings.idle_timeout_s and not conn.busy:
                    self._drop(conn, f"idle for {settings.idle_timeout_s:g} s")

    def _drop(self, conn: Connection, reason: str) -> None:
        """Drop at once: waiting for a silent peer's TLS goodbye would hold up the sweep of every other."""
        log.info("closing connection %s: %s", conn.peer, reason)
        conn.abort(reason)

    def _closed(self, conn: Connection) -> None:
        self.connections.discard(conn)
        self.unauthenticated.release(conn)
        self.broker.consumers.connection_closed(conn)
        for group in self.broker.locks.connection_closed(conn):
            self.broker.consumers.notify_group(group, f"queue leases released: connection {conn.peer} closed")
        if conn.close_reason.startswith("protocol error"):
            self.broker.stats.connections_rejected += 1

    async def _authenticate(self, conn: Connection, request: pb.AuthenticateRequest) -> bytes:
        answer = await self.broker.access.authenticate(conn, request)
        conn.limit_frames(self.broker.settings.max_frame_size)
        self.unauthenticated.release(conn)
        return answer

    def _handle(self, conn: Connection, envelope: pb.Envelope) -> HandlerResult:
        if self._stopping:
            raise ServiceNotAvailableError(f"broker {self.broker.name} is shutting down")
        method = METHODS.get(envelope.method)
        if method is None:
            raise UnknownMethodError(f"the broker does not serve {method_name(envelope.method)}")
        body = envelope.body
        request = parse_request(method.code, body)
        if method.serve is None or method.right is None:  # AUTHENTICATE
            return self._authenticate(conn, request)
        self.broker.access.check(conn, method.code, method.right, request)
        if method.writes:
            self.broker.role.fence()
        return method.serve(self.broker, conn, request, body)
