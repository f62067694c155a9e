"""A ``Producer`` run without a network for unit tests: its name server answers one route, its brokers are a fake."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from graymq.client.producer import Producer
from graymq.core.route import TopicRoute


class FixedNameServer:
    """Answers every route lookup with ``route``."""

    def __init__(self, route: TopicRoute) -> None:
        self.route = route

    async def get_route(self, topic: str) -> TopicRoute:
        return self.route


def run_offline(route: TopicRoute, brokers: Any, body: Callable[[Producer], Awaitable[None]],
                **settings: Any) -> Producer:
    """``body(producer)`` on a fresh event loop, the producer started against ``route`` and ``brokers`` (an object
    with ``send``/``send_batch``/``close`` as ``BrokerClients`` has); closed afterwards. Returns the producer."""
    p = Producer("P", "http://127.0.0.1:1", **settings)
    p.routes.nameserver = FixedNameServer(route)  # type: ignore[assignment]
    p.brokers = brokers
    p.started = True

    async def go() -> None:
        try:
            await body(p)
        finally:
            await p.routes.close()
            await p.nameserver.close()

    asyncio.run(go())
    return p
