"""One long-lived protocol connection, used by both ends: the broker's accepted sockets and clients.

Incoming bytes are decoded as they arrive, straight from the transport's ``data_received``
(``FrameProtocol``), with no reader task in between: a response resolves its request's future, and a
request reaches its handler, in the loop turn its bytes arrived in. Clients open connections with
``Connection.open``; servers accept them with ``listen``. Responses resolve the future waiting on their
serial number; requests go to the connection's handler, which may answer at once (bytes) or later (a
future, answered from its done callback, or another awaitable, run as a tracked task) so a
long-polling pull never blocks the requests pipelined behind it. When the connection closes, every
pending future fails with ``ConnectionClosedError``. Request deadlines share one timer per connection
(a heap of deadlines, armed at the earliest), not one timer handle per request.

The first frame written in a turn of the event loop leaves at once (an awaited request is on the wire
before its task yields); the frames written after it in that turn — the requests of many producers
sending at once — and the responses to the requests of one read leave together, in one
``transport.write`` (one system call) per ``FLUSH_FRAMES`` frames and at the end of that turn or read,
in the order they were written.

While the bytes written wait in the transport's buffer above ``WRITE_HIGH_WATER``, reading pauses:
the answers to what the peer sends would pile up otherwise.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import inspect
import itertools
import logging
import math
import ssl
from collections.abc import Awaitable, Callable
from typing import Any, cast

from google.protobuf.message import Message as PbMessage

from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.aio import with_timeout
from graymq.protocol.errors import (
    BadRequestError,
    ConfigError,
    ConnectFailedError,
    ConnectionClosedError,
    GrayMQError,
    ProtocolError,
    RequestTimeoutError,
    UnknownMethodError,
)
from graymq.protocol.frame import DEFAULT_MAX_FRAME_SIZE, BufferBudget, FrameDecoder, encode_frame
from graymq.protocol.remoting import (
    METHOD_TYPES,
    error_envelope,
    method_name,
    parse_body,
    parse_envelope,
    request_envelope,
)

log = logging.getLogger(__name__)

HandlerResult = bytes | None | Awaitable[bytes | None]
RequestHandler = Callable[["Connection", pb.Envelope], HandlerResult]

# Frames queued in one turn of the loop leave together, but at most this many per write: holding back
# every answer until a whole read is processed would stop the peer working on the first ones meanwhile
# (on two cores, coalescing everything halved the single-send rate; batches of 8 keep the overlap).
FLUSH_FRAMES = 8
WRITE_HIGH_WATER = 8 * 1024 * 1024


class Connection:
    """Frames in, frames out, requests matched to responses by serial number."""

    def __init__(
        self,
        transport: asyncio.Transport,
        protocol: FrameProtocol,
        handler: RequestHandler | None = None,
        *,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        on_close: Callable[[Connection], None] | None = None,
        budget: BufferBudget | None = None,
    ) -> None:
        self._transport = transport
        self._protocol = protocol
        self._handler = handler
        self._on_close = on_close
        self.max_frame_size = max_frame_size
        self._decoder = FrameDecoder(max_frame_size)
        self._budget = budget
        self._counted = 0  # this connection's partial-frame bytes counted in the budget
        self._serials = itertools.count(1)
        self._pending: dict[int, asyncio.Future[pb.Envelope]] = {}
        # (deadline, serial) of the requests in _pending, a heap; entries of answered requests leave lazily
        self._deadlines: list[tuple[float, int]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        self._tasks: set[asyncio.Future[Any]] = set()  # handlers still answering: tasks and futures
        self._out: list[bytes] = []  # frames written this turn of the loop after its first, sent by _flush_out
        self._turn_open = False  # a frame was written this turn: the next ones wait for its end
        self._receiving = False  # a read is being handled: its answers leave together at its end
        self._loop = asyncio.get_running_loop()
        self.last_read = self.opened_at = self._loop.time()
        self.closed = asyncio.Event()
        self.close_reason = ""
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.attributes: dict[str, object] = {}  # owner's per-connection state (e.g. client ids)
        protocol.attach(self)

    @classmethod
    async def open(
        cls, host: str, port: int, handler: RequestHandler | None = None, *, timeout: float = 5.0,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, tls: ssl.SSLContext | None = None,
    ) -> Connection:
        """Connect (over TLS with ``tls``, verifying the server's certificate for ``host``) and start reading."""
        try:
            opening = asyncio.get_running_loop().create_connection(
                FrameProtocol, host, port, ssl=tls, server_hostname=host if tls else None)
            transport, protocol = await with_timeout(opening, timeout)
        except ssl.SSLCertVerificationError as exc:  # an operator must act: retrying cannot help
            raise ConfigError(f"TLS with {host}:{port} failed: certificate verify failed: {exc.verify_message} "
                              "(the CA is GRAYMQ_TLS_CA, else the system's)") from exc
        except ssl.SSLError as exc:
            if exc.reason == "WRONG_VERSION_NUMBER":
                raise ConfigError(f"TLS with {host}:{port} failed: it does not speak TLS (GRAYMQ_TLS=false for a "
                                  "plain broker)") from exc
            raise ConnectFailedError(f"TLS with {host}:{port} failed: {exc.reason or exc}") from exc
        except (TimeoutError, OSError) as exc:
            raise ConnectFailedError(f"cannot connect to {host}:{port}: {exc or 'timeout'}") from exc
        return cls(transport, protocol, handler, max_frame_size=max_frame_size)

    @property
    def is_closed(self) -> bool:
        return self.closed.is_set()

    @property
    def busy(self) -> bool:
        """Requests of the peer still being answered (a held long poll), or requests of ours awaiting answers."""
        return bool(self._tasks or self._pending)

    def limit_frames(self, max_frame_size: int) -> None:
        """Refuse frames above ``max_frame_size`` from now on (the peer's, as they arrive)."""
        self._decoder.max_frame_size = max_frame_size

    async def request(self, method: int, body: PbMessage, timeout: float = 5.0) -> PbMessage:
        """Send a request and return the typed response body; errors raise their registered class."""
        if self.is_closed:
            raise ConnectionClosedError(f"connection to {self.peer} is closed: {self.close_reason}")
        serial = next(self._serials) & 0xFFFFFFFF
        loop = self._loop
        future: asyncio.Future[pb.Envelope] = loop.create_future()
        pending = self._pending
        pending[serial] = future
        deadline = loop.time() + timeout
        heapq.heappush(self._deadlines, (deadline, serial))
        if deadline < self._timer_at:
            self._arm(deadline)
        try:
            self._write(serial, request_envelope(method, body))
            envelope = await future
        except _Expired as exc:
            raise RequestTimeoutError(f"{method_name(method)} to {self.peer}: no response in {timeout}s") from exc
        finally:
            pending.pop(serial, None)
            deadlines = self._deadlines
            while deadlines and deadlines[0][1] not in pending:  # answered in order: the oldest entry leaves
                heapq.heappop(deadlines)
        return parse_body(envelope, response=True)

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = when
        self._timer = self._loop.call_at(when, self._expire_due)

    def _expire_due(self) -> None:
        """Fail the requests past their deadline, drop answered entries, re-arm for the next pending one."""
        self._timer = None
        self._timer_at = math.inf
        now = self._loop.time()
        deadlines, pending = self._deadlines, self._pending
        while deadlines:
            deadline, serial = deadlines[0]
            future = pending.get(serial)
            if future is not None and deadline > now:
                self._arm(deadline)
                return
            heapq.heappop(deadlines)
            if future is not None and not future.done():
                future.set_exception(_Expired())

    def send_oneway(self, method: int, body: PbMessage) -> None:
        """Fire and forget; silently dropped when the connection is closed."""
        if not self.is_closed:
            self._write(next(self._serials) & 0xFFFFFFFF, request_envelope(method, body, oneway=True))

    def _write(self, serial: int, payload: bytes) -> None:
        """Send one frame: the first of a turn of the loop at once, the next ones with each other at the end of
        the turn (``_flush_out``); while a read is answered (``_received``), all of them together."""
        frame = encode_frame(serial, payload, self.max_frame_size)
        out = self._out
        if self._turn_open or self._receiving:
            out.append(frame)
            if len(out) >= FLUSH_FRAMES:
                self._flush_out()
            return
        self._turn_open = True
        self._loop.call_soon(self._end_turn)
        if self._transport.is_closing():
            return
        self._transport.write(frame)

    def _end_turn(self) -> None:
        self._turn_open = False
        self._flush_out()

    def _flush_out(self) -> None:
        if not self._out:
            return
        out, self._out = self._out, []
        transport = self._transport
        if transport.is_closing():
            return
        transport.write(out[0] if len(out) == 1 else b"".join(out))

    def _received(self, data: bytes) -> None:
        """Handle the frames ``data`` completes; their answers leave in one write. ``ProtocolError``: close."""
        self.last_read = self._loop.time()
        decoder, budget = self._decoder, self._budget
        frames = decoder.feed(data)
        if budget is not None:
            counted, self._counted = self._counted, decoder.pending
            budget.move(counted, self._counted)
        self._receiving = True
        try:
            for frame in frames:
                self._on_frame(frame.serial_no, frame.payload)
        finally:
            self._receiving = False
            self._flush_out()  # the answers to this read, in one write (those made before a failure too)

    def _protocol_error(self, exc: ProtocolError) -> str:
        log.warning("closing connection %s: %s", self.peer, exc.message)
        return f"protocol error: {exc.message}"

    def _on_frame(self, serial: int, payload: bytes) -> None:
        try:
            envelope = parse_envelope(payload)
        except ProtocolError as exc:
            # The frame was valid, so the peer gets an answer it can match before we move on.
            self._write(serial, error_envelope(pb.METHOD_UNSPECIFIED, BadRequestError(exc.message)))
            log.warning("bad envelope from %s: %s", self.peer, exc.message)
            return
        if envelope.is_response:
            future = self._pending.get(serial)
            if future is not None and not future.done():
                future.set_result(envelope)
            return
        self._dispatch(serial, envelope)

    def _dispatch(self, serial: int, envelope: pb.Envelope) -> None:
        if self._handler is None or envelope.method not in METHOD_TYPES:
            if not envelope.oneway:
                error = UnknownMethodError(f"unknown method {method_name(envelope.method)}")
                self._write(serial, error_envelope(envelope.method, error))
            return
        try:
            result = self._handler(self, envelope)
        except GrayMQError as exc:
            self._reply(serial, envelope, error_envelope(envelope.method, exc))
            return
        except Exception as exc:  # the handler failed; answer and keep the connection
            log.exception("handler for %s from %s failed", method_name(envelope.method), self.peer)
            self._reply(serial, envelope, error_envelope(envelope.method, GrayMQError(f"internal error: {exc}")))
            return
        if type(result) is bytes:  # the common case first: an answer now
            self._reply(serial, envelope, result)
        elif isinstance(result, asyncio.Future):
            # No task needed: answer from the future's done callback (e.g. a sync send waiting on a flush).
            self._tasks.add(result)
            result.add_done_callback(functools.partial(self._future_done, serial, envelope))
        elif inspect.isawaitable(result):
            task = self._loop.create_task(self._finish(serial, envelope, result))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            self._reply(serial, envelope, result)

    def _future_done(self, serial: int, envelope: pb.Envelope, future: asyncio.Future[bytes | None]) -> None:
        self._tasks.discard(future)
        if future.cancelled():
            return
        exc = future.exception()
        if exc is None:
            self._reply(serial, envelope, future.result())
        elif isinstance(exc, GrayMQError):
            self._reply(serial, envelope, error_envelope(envelope.method, exc))
        else:
            log.error("handler for %s from %s failed", method_name(envelope.method), self.peer, exc_info=exc)
            self._reply(serial, envelope, error_envelope(envelope.method, GrayMQError(f"internal error: {exc}")))

    async def _finish(self, serial: int, envelope: pb.Envelope, pending: Awaitable[bytes | None]) -> None:
        try:
            response = await pending
        except GrayMQError as exc:
            response = error_envelope(envelope.method, exc)
        except asyncio.CancelledError:
            return
        except Exception as exc:
            log.exception("handler for %s from %s failed", method_name(envelope.method), self.peer)
            response = error_envelope(envelope.method, GrayMQError(f"internal error: {exc}"))
        self._reply(serial, envelope, response)

    def _reply(self, serial: int, envelope: pb.Envelope, response: bytes | None) -> None:
        if envelope.oneway or response is None or self.is_closed:
            return
        try:
            self._write(serial, response)
        except ProtocolError as exc:  # response larger than a frame may be
            self._write(serial, error_envelope(envelope.method, exc))

    def _shutdown(self, reason: str) -> None:
        if self.closed.is_set():
            return
        self.close_reason = reason
        self.closed.set()
        if self._budget is not None:
            self._budget.move(self._counted, 0)
            self._counted = 0
        self._decoder.release()
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ConnectionClosedError(f"connection to {self.peer} closed: {reason}"))
        self._pending.clear()
        self._deadlines.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for task in list(self._tasks):
            task.cancel()
        self._flush_out()
        self._transport.close()
        if self._on_close is not None:
            self._on_close(self)

    async def close(self) -> None:
        """Fail what is pending, close the transport and wait until it is closed."""
        self._shutdown("closed locally")
        await self._protocol.closed

    def abort(self, reason: str) -> None:
        """Fail what is pending and drop the connection now: no flush, no TLS goodbye to wait for."""
        self._shutdown(reason)
        self._transport.abort()


class _Expired(Exception):
    """A request's deadline passed (set on its future by the timer)."""


async def listen(host: str, port: int, accept: Callable[[asyncio.Transport, FrameProtocol], object], *,
                 tls: ssl.SSLContext | None = None, tls_handshake_timeout: float | None = None) -> asyncio.Server:
    """Serve ``host:port`` (port 0 picks a free one; over TLS with ``tls``, a handshake not done within
    ``tls_handshake_timeout`` seconds aborted): ``accept(transport, protocol)`` runs for every new connection
    before any of its bytes is read, and makes its ``Connection`` or closes it."""
    loop = asyncio.get_running_loop()
    if tls is None:
        return await loop.create_server(lambda: FrameProtocol(accept), host, port)
    return await loop.create_server(lambda: FrameProtocol(accept), host, port, ssl=tls,
                                    ssl_handshake_timeout=tls_handshake_timeout)


class FrameProtocol(asyncio.Protocol):
    """The transport side of a connection: bytes go to the ``Connection`` attached to it as they arrive.

    An accepting server passes ``accept``, called when the transport is made; a client attaches its connection
    once ``create_connection`` returns (bytes arriving before that wait for it).
    """

    def __init__(self, accept: Callable[[asyncio.Transport, FrameProtocol], object] | None = None) -> None:
        self.conn: Connection | None = None
        self._accept = accept
        self._early: list[bytes] = []  # bytes received before the connection was attached
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass asyncio's
        self._transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        if self._accept is not None:
            try:
                self._accept(self._transport, self)
            except Exception:  # no connection was made of it: nothing would ever read or close it
                log.exception("accepting a connection from %s failed", transport.get_extra_info("peername"))
                self._transport.abort()

    def attach(self, conn: Connection) -> None:
        self.conn = conn
        for data in self._early:
            self.data_received(data)
        self._early.clear()

    def data_received(self, data: bytes) -> None:
        conn = self.conn
        if conn is None:
            self._early.append(data)
            return
        try:
            conn._received(data)
        except ProtocolError as exc:
            conn._shutdown(conn._protocol_error(exc))

    def eof_received(self) -> bool:
        conn = self.conn
        if conn is not None:
            try:
                conn._decoder.eof()
            except ProtocolError as exc:
                conn._shutdown(conn._protocol_error(exc))
            else:
                conn._shutdown("closed by peer")
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self.conn is not None:
            self.conn._shutdown("closed by peer" if exc is None else f"connection error: {exc}")
        if not self.closed.done():
            self.closed.set_result(None)

    def pause_writing(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.pause_reading()

    def resume_writing(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.resume_reading()
