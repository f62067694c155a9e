"""Broker connections lent to the threads of a blocking client, keyed by address.

A request takes an idle connection to its broker (or opens one), and gives it back when answered: threads
sending at once each hold a connection of their own (at most one per thread and broker), none waits for
another's answer, and a thread that ends leaves its connection to the others. Taking and giving back are a
``list.pop``/``append``, atomic under the GIL: no lock on the send path.
"""

from __future__ import annotations

import ssl
import threading

from google.protobuf.message import Message as PbMessage

from graymq.client.blocking_connection import BlockingConnection
from graymq.client.send_wire import SendReply
from graymq.protocol.errors import ConnectionClosedError


class BlockingBrokers:
    """Connections to brokers, authenticated with ``token`` (none sent when empty), over TLS with ``tls``."""

    def __init__(self, *, timeout_s: float, token: str, tls: ssl.SSLContext | None) -> None:
        self.timeout_s = timeout_s
        self.token = token
        self.tls = tls
        self._idle: dict[str, list[BlockingConnection]] = {}
        self._open: set[BlockingConnection] = set()
        self._lock = threading.Lock()  # guards _open: connections opened and closed
        self.closed = False

    def call(self, address: str, method: int, body: PbMessage, timeout_s: float) -> PbMessage:
        """The response of the broker at ``address`` to ``body``; errors as ``BlockingConnection.request`` raises
        them."""
        conn = self._take(address, timeout_s)
        try:
            return conn.request(method, body, timeout_s)
        finally:
            self._give_back(conn)

    def send_message(self, address: str, envelope: bytes, timeout_s: float) -> SendReply:
        """The answer of the broker at ``address`` to a SEND_MESSAGE (``BlockingConnection.send_message``)."""
        conn = self._take(address, timeout_s)
        try:
            return conn.send_message(envelope, timeout_s)
        finally:
            self._give_back(conn)

    def _take(self, address: str, timeout_s: float) -> BlockingConnection:
        """An idle connection to ``address``, else a new one."""
        try:
            return self._idle[address].pop()
        except (KeyError, IndexError):  # none idle: none opened yet, or all in use
            pass
        return self._connect(address, timeout_s)

    def _connect(self, address: str, timeout_s: float) -> BlockingConnection:
        if self.closed:
            raise ConnectionClosedError("the producer is stopped")
        conn = BlockingConnection.open(address, timeout_s=min(timeout_s, self.timeout_s), tls=self.tls,
                                       token=self.token)
        with self._lock:
            self._open.add(conn)
        return conn

    def _give_back(self, conn: BlockingConnection) -> None:
        """Idle again; a connection that closed (lost, timed out) takes the idle ones to its broker with it: a
        broker that dropped one has likely dropped them all, and a retry must not find a dead one."""
        if self.closed:
            conn.close()
        if not conn.closed:
            self._idle.setdefault(conn.address, []).append(conn)
            return
        stale = self._idle.pop(conn.address, [])
        with self._lock:
            self._open.difference_update([conn, *stale])
        for idle in stale:
            idle.close()

    def open_count(self) -> int:
        """Connections open now, idle or in use."""
        return len(self._open)

    def close(self) -> None:
        """Close every connection; a request in flight fails, and none opens from now on."""
        self.closed = True
        with self._lock:
            conns, self._open = list(self._open), set()
        self._idle.clear()
        for conn in conns:
            conn.close()
