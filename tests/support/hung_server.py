"""A TCP server on loopback that accepts connections and never answers: a hung name server or broker."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class HungServer:
    """Accepts every connection, reads nothing, writes nothing; ``connected`` is set at the first one."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.connected = threading.Event()
        self._held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # closed
            self._held.append(conn)
            self.connected.set()

    def close(self) -> None:
        self._listener.close()
        for conn in self._held:
            conn.close()


@contextmanager
def hung_server() -> Iterator[HungServer]:
    server = HungServer()
    try:
        yield server
    finally:
        server.close()
