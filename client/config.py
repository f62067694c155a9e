"""``ClientConfig``: where a process's clients find the name servers and brokers, and how they authenticate.

``ClientConfig.from_env()`` is the one place in the client library that reads the environment
(``GRAYMQ_NAMESERVER``, ``GRAYMQ_TOKEN``); an argument given explicitly wins over the variable. TLS to brokers
stays ``protocol/tls.py``'s (``GRAYMQ_TLS`` / ``GRAYMQ_TLS_CA``, shared with the broker and the CLI) unless
``tls`` is set here.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Sequence
from dataclasses import dataclass

from graymq.protocol.errors import ConfigError


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """The values one ``ClientInstance`` is built from (client/instance.py): the clients given the same
    ``ClientConfig`` share its name-server client, route cache and broker connections.

    >>> ClientConfig.from_env("http://ns-1:8080, http://ns-2:8080", token="t").nameserver
    ('http://ns-1:8080', 'http://ns-2:8080')
    """

    nameserver: tuple[str, ...] = ()  # name server URLs, tried in turn (checked when the client is built)
    token: str | None = None  # the principal's token, sent to name servers and brokers; None: none sent
    tls: ssl.SSLContext | bool | None = None  # to brokers: a context, on/off, or None for protocol/tls's default
    nameserver_timeout_s: float = 3.0  # one name-server call
    broker_timeout_s: float = 5.0  # a broker connection's set-up and a call without its own timeout
    route_ttl_s: float = 30.0  # a cached route is refreshed after this long (jittered)

    @classmethod
    def from_env(cls, nameserver: str | Sequence[str] | None = None, token: str | None = None, *,
                 tls: ssl.SSLContext | bool | None = None, nameserver_timeout_s: float = 3.0,
                 broker_timeout_s: float = 5.0, route_ttl_s: float = 30.0) -> ClientConfig:
        """The config of the arguments, ``nameserver`` from ``GRAYMQ_NAMESERVER`` (comma-separated) and
        ``token`` from ``GRAYMQ_TOKEN`` when not given."""
        raw = nameserver if nameserver is not None else os.environ.get("GRAYMQ_NAMESERVER", "")
        urls = raw.split(",") if isinstance(raw, str) else list(raw)
        return cls(nameserver=tuple(u.strip() for u in urls if u.strip()),
                   token=token if token is not None else os.environ.get("GRAYMQ_TOKEN"), tls=tls,
                   nameserver_timeout_s=nameserver_timeout_s, broker_timeout_s=broker_timeout_s,
                   route_ttl_s=route_ttl_s)


def client_config(config: ClientConfig | None, nameserver: str | Sequence[str] | None = None,
                  token: str | None = None, *, route_ttl_s: float = 30.0) -> ClientConfig:
    """A client's config: ``config`` when given (then ``nameserver`` and ``token`` must not be), else one of its
    own from those arguments and the environment."""
    if config is None:
        return ClientConfig.from_env(nameserver, token, route_ttl_s=route_ttl_s)
    if nameserver is not None or token is not None:
        raise ConfigError("give the name servers and token in config= or as arguments, not both")
    return config
