"""Stock clients' registrations in the name server, kept as long as the client is there.

A registration is one client in one group (a producer in its topic's producer group, a consumer in its consumer
group). The client's registrations last while one of its telemetry streams is open; without a stream, until it has
not used them (a send, a receive) for ``expiry_s``. NotifyClientTermination and the last stream's end drop them at
once, and each registration closes itself: it stops heartbeating and leaves its group in the name server. Each
is held in its principal's registrations budget (``budgets``) until it closes, and talks to the name server through
its credential's one shared client (``NameServerSessions``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from graymq.broker_ext.grpc_endpoint.budgets import Budget, BudgetLimits, Budgets
from graymq.broker_ext.grpc_endpoint.nameserver_session import NameServerSession
from graymq.nameserver_api.client import NameServerClient
from graymq.protocol.aio import cancel_and_wait

log = logging.getLogger(__name__)

PROTOCOL_LABEL = {"protocol": "rocketmq5"}  # on every stock client's registration: how gray status and the console
# tell a stock producer or consumer from graymq's own


class Registration(Protocol):
    used_at: float  # monotonic seconds of its last use

    async def close(self) -> None: ...


R = TypeVar("R", bound=Registration)


class NameServerSessions:
    """One name-server session per credential, shared by every registration made with it, closed with the last: a
    client whose heartbeats go out in batches (``NameServerSession``).

    A client is a connection pool and a TLS context (most of a megabyte, not given back to the system once freed): one
    per registration made a flood of them cost the broker its memory, and the name server a request each per beat.
    """

    def __init__(self, urls: list[str], interval_s: float = 3.0) -> None:
        self.urls = urls
        self.interval_s = interval_s  # the registrations' heartbeat interval
        self._clients: dict[str | None, tuple[NameServerSession, int]] = {}  # credential -> (session, registrations)

    def acquire(self, token: str | None) -> NameServerSession:
        session, users = self._clients.get(token) or (self._open(token), 0)
        self._clients[token] = (session, users + 1)
        return session

    def _open(self, token: str | None) -> NameServerSession:
        # a watch holds a connection per MAX_BATCH registrations (bounded by the registrations budget): no pool
        # limit, or watches would queue the heartbeats behind them
        return NameServerSession(NameServerClient(self.urls, token=token, max_connections=None), self.interval_s)

    async def release(self, token: str | None) -> None:
        client, users = self._clients[token]
        if users > 1:
            self._clients[token] = (client, users - 1)
        else:
            del self._clients[token]
            await client.close()


class Registrations(Generic[R]):
    """``items``: (client id, group) -> registration, made by ``add``; ``forget(client_id)`` closes a client's;
    ``start`` sweeps the idle ones away every ``expiry_s / 2``; ``gone(client_id)`` hears of a client forgotten with
    no stream left, ``closed(key)`` of each registration closed."""

    def __init__(self, role: str, *, expiry_s: float, gone: Callable[[str], None] = lambda client_id: None,
                 budgets: Budgets | None = None, sessions: NameServerSessions | None = None,
                 closed: Callable[[tuple[str, str]], None] = lambda key: None) -> None:
        self.role = role
        self.expiry_s = expiry_s
        self.gone = gone
        self.closed = closed
        self.budgets = budgets if budgets is not None else Budgets(BudgetLimits())
        self.sessions = sessions if sessions is not None else NameServerSessions([])
        self.items: dict[tuple[str, str], R] = {}
        # (client id, group) -> the principal whose budget it holds and the credential of its name-server session
        self._holders: dict[tuple[str, str], tuple[str, str | None]] = {}
        self._streams: dict[str, int] = {}  # client id -> telemetry streams open
        self._sweeper: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep(), name=f"grpc {self.role} registrations")

    async def stop(self) -> None:
        if self._sweeper is not None:
            await cancel_and_wait(self._sweeper)
        for client_id in {client_id for client_id, _ in self.items}:
            await self.forget(client_id)

    def add(self, key: tuple[str, str], principal: str, token: str | None, make: Callable[[NameServerSession], R]
            ) -> R:
        """``make(session)`` kept as ``key``'s registration, held in ``principal``'s budget (``TOO_MANY_REQUESTS``
        when full: nothing made) and given the name-server session of ``token``."""
        self.budgets.take((Budget.REGISTRATIONS_PER_PRINCIPAL, principal))
        item = self.items[key] = make(self.sessions.acquire(token))
        self._holders[key] = (principal, token)
        return item

    def has_stream(self, client_id: str) -> bool:
        return client_id in self._streams

    def stream_opened(self, client_id: str) -> None:
        self._streams[client_id] = self._streams.get(client_id, 0) + 1

    async def stream_closed(self, client_id: str) -> None:
        """One stream of ``client_id`` ended; with its last one its registrations go."""
        left = self._streams.pop(client_id, 0) - 1
        if left > 0:
            self._streams[client_id] = left
        else:
            await self.forget(client_id)

    async def forget(self, client_id: str) -> None:
        """Close every registration of ``client_id`` (it terminated or went away)."""
        for key in [k for k in self.items if k[0] == client_id]:
            item = self.items.pop(key)
            holder = self._holders.pop(key, None)
            await item.close()
            self.closed(key)
            if holder is not None:
                self.budgets.give_back((Budget.REGISTRATIONS_PER_PRINCIPAL, holder[0]))
                await self.sessions.release(holder[1])
        if client_id not in self._streams:
            self.gone(client_id)

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(self.expiry_s / 2)
            idle_since = time.monotonic() - self.expiry_s
            idle = {client_id for (client_id, _), r in self.items.items()
                    if r.used_at < idle_since and client_id not in self._streams}
            for client_id in idle:
                log.info("stock %s %s: no stream and no use for %.0f s: unregistered", self.role, client_id,
                         self.expiry_s)
                await self.forget(client_id)


class RegisteredSides(Generic[R]):
    """The producers' and consumers' sides alike: ``enabled`` with name servers to register in, and then their
    ``registrations`` swept from ``start`` until ``stop`` (which closes those left)."""

    nameserver_urls: list[str]
    registrations: Registrations[R]

    @property
    def enabled(self) -> bool:
        return bool(self.nameserver_urls)

    def start(self) -> None:
        if self.enabled:
            self.registrations.start()

    async def stop(self) -> None:
        await self.registrations.stop()
