"""A broker connection on a plain (or TLS) socket: one request, then its response, in the caller's thread.

No event loop and no reader thread: ``request`` writes the frame and reads until the frame answering it has
arrived. Pushes the broker sends meanwhile (group-change notices, meant for consumers) are skipped. A request
that times out or fails half way leaves the stream in an unknown state, so the connection closes and the caller
opens a new one (a producer's retry of the same sequence, client/send_retry.py). Not shared between threads:
``BlockingBrokers`` (client/blocking_brokers.py) lends each thread a connection of its own.
"""

from __future__ import annotations

import itertools
import math
import socket
import ssl
import struct
import time

from google.protobuf.message import Message as PbMessage

from graymq.client.send_wire import SendReply, send_reply
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.broker_client import split_address
from graymq.protocol.errors import (
    ConfigError,
    ConnectFailedError,
    ConnectionClosedError,
    GrayMQError,
    RequestTimeoutError,
    error_from_code,
)
from graymq.protocol.frame import DEFAULT_MAX_FRAME_SIZE, FrameDecoder, encode_frame
from graymq.protocol.remoting import method_name, parse_body, parse_envelope, request_envelope

RECV_SIZE = 256 * 1024
# struct timeval for SO_RCVTIMEO / SO_SNDTIMEO: seconds, microseconds (C longs)
TIMEVAL = struct.Struct("@ll")
TIMEOUT_STEP_S = 0.01  # a plain socket's kernel timeout is set in these steps (rounded up), so rarely re-set


def connect(address: str, timeout_s: float, tls: ssl.SSLContext | None) -> socket.socket:
    """A connected socket to ``address`` (``host:port``), TLS-wrapped with ``tls`` (the certificate verified for the
    host); ``ConnectFailedError`` when it cannot be made, ``ConfigError`` when retrying cannot help."""
    host, port = split_address(address)
    try:
        sock = socket.create_connection((host, port), timeout=timeout_s)
    except OSError as exc:
        raise ConnectFailedError(f"cannot connect to {address}: {exc or 'timeout'}") from exc
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if tls is None:
        return sock
    try:
        return tls.wrap_socket(sock, server_hostname=host)
    except ssl.SSLCertVerificationError as exc:
        sock.close()
        raise ConfigError(f"TLS with {address} failed: certificate verify failed: {exc.verify_message} "
                          "(the CA is GRAYMQ_TLS_CA, else the system's)") from exc
    except (ssl.SSLError, OSError) as exc:
        sock.close()
        if isinstance(exc, ssl.SSLError) and exc.reason == "WRONG_VERSION_NUMBER":
            raise ConfigError(f"TLS with {address} failed: it does not speak TLS (GRAYMQ_TLS=false for a plain "
                              "broker)") from exc
        raise ConnectFailedError(f"TLS with {address} failed: {exc}") from exc


class BlockingConnection:
    """Requests answered one at a time on one socket; ``open`` connects and authenticates."""

    def __init__(self, sock: socket.socket, address: str, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.sock = sock
        self.address = address
        # A plain socket is kept blocking, each call bounded by the kernel (SO_RCVTIMEO/SO_SNDTIMEO): a Python
        # socket timeout would poll() before every send and receive, two system calls more per request.
        self._kernel_timeout = not isinstance(sock, ssl.SSLSocket)
        self._timeout_s = 0.0  # the kernel timeout set now (0: none yet)
        if self._kernel_timeout:
            sock.settimeout(None)
        self.max_frame_size = max_frame_size
        self._decoder = FrameDecoder(max_frame_size)
        self._received = bytearray(RECV_SIZE)
        self._received_view = memoryview(self._received)
        self._serials = itertools.count(1)
        self.closed = False

    @classmethod
    def open(cls, address: str, *, timeout_s: float, tls: ssl.SSLContext | None, token: str) -> BlockingConnection:
        """Connected, and authenticated with ``token`` when there is one (closed again when that fails)."""
        conn = cls(connect(address, timeout_s, tls), address)
        if token:
            try:
                conn.request(pb.AUTHENTICATE, pb.AuthenticateRequest(token=token), timeout_s)
            except BaseException:
                conn.close()
                raise
        return conn

    def request(self, method: int, body: PbMessage, timeout_s: float) -> PbMessage:
        """The typed response to ``body``; a wire error raises its registered class, a timeout
        ``RequestTimeoutError`` and a lost connection ``ConnectionClosedError`` (both close the connection)."""
        try:
            serial, deadline = self._next(timeout_s)
            self.sock.sendall(encode_frame(serial, request_envelope(method, body), self.max_frame_size))
            envelope = self._response(serial, deadline, self.sock.recv_into(self._received))
        except GrayMQError:  # a frame that does not decode: the stream cannot be trusted any more
            self.close()
            raise
        except OSError as exc:
            raise self._failed(exc, method, timeout_s) from exc
        return parse_body(envelope, response=True)

    def send_message(self, envelope: bytes, timeout_s: float) -> SendReply:
        """The answer to a SEND_MESSAGE (its request ``envelope`` written already): ``(0, msg_id, queue_offset,
        commit_log_offset)``, read by ``send_reply`` when the first bytes received are exactly its frame (the usual
        case); errors as ``request`` raises them."""
        try:
            serial, deadline = self._next(timeout_s)
            self.sock.sendall(encode_frame(serial, envelope, self.max_frame_size))
            received = self.sock.recv_into(self._received)
            reply = send_reply(self._received, received, serial, self.max_frame_size) \
                if received and not self._decoder.pending else None
            if reply is None:
                answer = self._response(serial, deadline, received)
        except GrayMQError:
            self.close()
            raise
        except OSError as exc:
            raise self._failed(exc, pb.SEND_MESSAGE, timeout_s) from exc
        if reply is None:
            response = parse_body(answer, response=True)
            return pb.OK, response.msg_id, response.queue_offset, response.commit_log_offset  # type: ignore
        if reply[0]:
            raise error_from_code(reply[0], reply[1])
        return reply

    def _next(self, timeout_s: float) -> tuple[int, float]:
        """The next request's serial number and deadline, the socket's timeout set for it."""
        if self.closed:
            raise ConnectionClosedError(f"connection to {self.address} is closed")
        if not self._timeout_s - TIMEOUT_STEP_S < timeout_s <= self._timeout_s:  # else: the same step, set
            self._bound(timeout_s)
        return next(self._serials) & 0xFFFFFFFF, time.monotonic() + timeout_s

    def _failed(self, exc: OSError, method: int, timeout_s: float) -> GrayMQError:
        """The error a socket's failure raises, the connection closed: a timeout or a lost connection."""
        self.close()
        if isinstance(exc, (TimeoutError, BlockingIOError)):  # BlockingIOError: a kernel timeout ran out
            return RequestTimeoutError(f"{method_name(method)} to {self.address}: no response in {timeout_s:g}s")
        return ConnectionClosedError(f"connection to {self.address} lost: {exc}")

    def _response(self, serial: int, deadline: float, received: int) -> pb.Envelope:
        """Read until the response numbered ``serial`` arrives (other frames are pushes: skipped), into one
        buffer kept for the connection's life; ``received``: the bytes of the first read, there already."""
        while True:
            if not received:
                raise ConnectionResetError("closed by the broker")
            for frame in self._decoder.feed(self._received_view[:received]):
                envelope = parse_envelope(frame.payload)
                if envelope.is_response and frame.serial_no == serial:
                    return envelope
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            self._bound(left)
            received = self.sock.recv_into(self._received)

    def _bound(self, timeout_s: float) -> None:
        """Each socket call from now on gives up after ``timeout_s`` (on a plain socket at most one
        ``TIMEOUT_STEP_S`` later: the kernel's timeout is set only when that step changes)."""
        if not self._kernel_timeout:
            self.sock.settimeout(timeout_s)
            self._timeout_s = 0.0  # a TLS socket's timeout is set at every call
            return
        bound = math.ceil(timeout_s / TIMEOUT_STEP_S) * TIMEOUT_STEP_S
        if bound != self._timeout_s:
            seconds = int(bound)
            timeval = TIMEVAL.pack(seconds, max(int((bound - seconds) * 1e6), 1 if seconds == 0 else 0))
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)
            self._timeout_s = bound

    def close(self) -> None:
        """Close the socket; a request another thread is waiting on wakes up and fails."""
        if self.closed:
            return
        self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # not connected any more: nothing to wake
        self.sock.close()
