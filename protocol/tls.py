"""TLS contexts for the broker port and the name server, and the client side's choice to use TLS.

A server presents ``--tls-cert FILE --tls-key FILE`` (PEM). Clients verify it against
``GRAYMQ_TLS_CA=FILE`` (PEM bundle) or, without it, the system's trust store. Clients speak TLS to
brokers when ``GRAYMQ_TLS=true``, or when ``GRAYMQ_TLS_CA`` is set and ``GRAYMQ_TLS`` is not; name
servers are reached over TLS by their ``https://`` URLs.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable
from pathlib import Path

from graymq.protocol.errors import ConfigError

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def server_context(cert_file: str | Path, key_file: str | Path) -> ssl.SSLContext:
    """A server context presenting ``cert_file`` with ``key_file``; ``ConfigError`` when they do not load."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(str(cert_file), str(key_file))
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load TLS certificate {cert_file} with key {key_file}: {exc}") from exc
    return context


LEFT_DURING_HANDSHAKE = "LEFT_DURING_HANDSHAKE"  # the reason given for a client that hung up mid-handshake


def report_handshake_failures(context: ssl.SSLContext, on_failure: Callable[[str], None]) -> None:
    """Call ``on_failure(reason)`` for every handshake of ``context`` that fails: with the TLS error's reason (a
    client's alert rejecting the certificate, plain TCP or HTTP on the TLS port), or ``LEFT_DURING_HANDSHAKE``
    for a client that sent its hello and hung up or stalled before the handshake ended (what clients that
    reject the certificate without an alert do, asyncio's among them). A connection that sends nothing at all
    (a TCP probe) is no handshake. asyncio and uvloop close such connections and log them at DEBUG only; they
    make their TLS objects with ``context.wrap_bio``, which builds ``context.sslobject_class``."""

    class _Reporting(ssl.SSLObject):
        _calls = 0  # do_handshake calls: the first runs before the client sent anything
        _ended = False  # completed, or its failure reported

        def do_handshake(self) -> None:
            self._calls += 1
            try:
                super().do_handshake()
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError, ssl.SSLSyscallError):
                raise  # the handshake goes on when more bytes come (the loops retry a syscall error too)
            except ssl.SSLError as exc:
                self._ended = True
                on_failure(exc.reason or type(exc).__name__)
                raise
            self._ended = True

        def __del__(self) -> None:
            if self._calls > 1 and not self._ended:
                on_failure(LEFT_DURING_HANDSHAKE)

    context.sslobject_class = _Reporting


def ca_file(ca: str | Path | None = None) -> str | None:
    """``ca``, else ``GRAYMQ_TLS_CA``; ``None`` means the system trust store."""
    value = str(ca) if ca is not None else os.environ.get("GRAYMQ_TLS_CA", "").strip()
    return value or None


def client_context(ca: str | Path | None = None) -> ssl.SSLContext:
    """A context verifying servers against ``ca`` (or ``GRAYMQ_TLS_CA``, else the system store)."""
    cafile = ca_file(ca)
    try:
        context = ssl.create_default_context(cafile=cafile)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load the TLS CA file {cafile}: {exc}") from exc
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def broker_tls(tls: bool | None = None, ca: str | Path | None = None) -> ssl.SSLContext | None:
    """The context for client connections to brokers, or ``None`` for plain TCP.

    ``tls`` ``None`` reads ``GRAYMQ_TLS`` (default: on when a CA file is configured).
    """
    if tls is None:
        raw = os.environ.get("GRAYMQ_TLS")
        if raw is None:
            tls = ca_file(ca) is not None
        elif raw.strip().lower() in _TRUE:
            tls = True
        elif raw.strip().lower() in _FALSE:
            tls = False
        else:
            raise ConfigError(f"GRAYMQ_TLS={raw!r}: expected true or false")
    return client_context(ca) if tls else None


def https_verify(ca: str | Path | None = None) -> ssl.SSLContext | bool:
    """What HTTP clients verify ``https://`` name servers with: the CA file's context, or ``True`` (system store)."""
    return client_context(ca) if ca_file(ca) is not None else True


def untrusted_certificate(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it wraps) is a server certificate that failed verification."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
