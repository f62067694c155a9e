"""Running the name server: schema check (or migration), then uvicorn on a pre-bound socket (HTTPS with a
certificate and key)."""

from __future__ import annotations

import gc
import logging
import signal
import socket
from collections.abc import Callable

import uvicorn
from fastapi import FastAPI

from graymq.nameserver.app import create_app
from graymq.nameserver.settings import InsecureConfigError, NameServerSettings
from graymq.protocol.errors import ConfigError
from graymq.protocol.tls import server_context

log = logging.getLogger(__name__)


class StartupRefused(Exception):
    """The configuration or the schema is not fit to serve; the message says what to do."""


class StartupFailed(Exception):
    """The database or the listening address could not be used at start-up."""


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening-ready TCP socket on ``host:port`` (port 0: a free port chosen by the kernel)."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


def _prepared_app(settings: NameServerSettings, prepare_database: Callable[[NameServerSettings], None]) -> FastAPI:
    try:
        app = create_app(settings)
    except InsecureConfigError as exc:
        raise StartupRefused(str(exc)) from exc
    except OSError as exc:
        raise StartupFailed(f"cannot prepare the database file: {exc}") from exc
    prepare_database(settings)
    return app


class _Server(uvicorn.Server):
    """uvicorn's server, calling ``on_ready`` once it accepts connections and ``on_stopping`` before it waits
    for open requests to finish."""

    def __init__(self, config: uvicorn.Config, on_ready: Callable[[], None], on_stopping: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_ready = on_ready
        self._on_stopping = on_stopping

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            # Start-up's objects (FastAPI, SQLAlchemy, pydantic: ~130k) live until exit; out of the
            # collector's sight, a full collection no longer pauses requests for 10-40 ms.
            gc.collect()
            gc.freeze()
            self._on_ready()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self._on_stopping()
        await super().shutdown(sockets)


def serve(settings: NameServerSettings, on_ready: Callable[[str, int], None],
          prepare_database: Callable[[NameServerSettings], None]) -> None:
    """Serve until SIGTERM/SIGINT; ``on_ready(host, port)`` runs once the socket accepts requests;
    ``prepare_database`` (``graymq.migrations.schema.prepare_database``) makes the schema current first.

    Serves HTTPS when ``settings.tls_cert`` and ``tls_key`` are set. Raises ``StartupRefused`` (unsafe token
    setup, a certificate or key that does not load, stale schema) or ``StartupFailed`` (database unreachable,
    SQLite directory not creatable, address in use) before serving.
    """
    cert, key = settings.tls_cert, settings.tls_key
    tls = cert is not None and key is not None
    if cert is not None and key is not None:
        try:  # the files uvicorn will load, checked here so a bad one is a message, not a traceback
            server_context(cert, key)
        except ConfigError as exc:
            raise StartupRefused(exc.message) from exc
    try:  # first, so a port in use is the only line printed (not the app's start-up warnings before it)
        sock = bind_socket(settings.host, settings.port)
    except OSError as exc:
        raise StartupFailed(
            f"cannot listen on {settings.host}:{settings.port}: {exc.strerror or exc}"
        ) from exc
    try:
        app = _prepared_app(settings, prepare_database)
    except BaseException:
        sock.close()
        raise
    host, port = sock.getsockname()[:2]
    debug = settings.log_level == "DEBUG"
    config = uvicorn.Config(  # uvicorn logs through ours: its loggers stay at WARNING unless DEBUG
        app,
        log_config=None,
        log_level="debug" if debug else None,
        access_log=debug,
        timeout_graceful_shutdown=10,
        ssl_certfile=cert,
        ssl_keyfile=key,
    )
    # Watches (long polls) answer at once when the server stops instead of holding the shutdown up.
    server = _Server(config, lambda: on_ready(host, port), app.state.group_changes.close)
    # uvicorn re-raises the signal it stopped for once it has shut down; with this handler in place
    # that is a no-op, so SIGTERM ends the process with status 0 instead of killing it.
    previous = signal.signal(signal.SIGTERM, lambda _signum, _frame: None)
    log.info("name server listening on %s:%d%s", host, port, " over TLS" if tls else "")
    try:
        server.run(sockets=[sock])
    finally:
        signal.signal(signal.SIGTERM, previous)
        sock.close()
