"""The stock clients' heartbeats to the name server, sent in batches over one session per credential.

The broker keeps a membership per stock client and group; their heartbeats beat on one grid of the interval
(``Membership(aligned=True)``), so those due together arrive here within ``WINDOW_S`` of each other and go out as
one ``POST /v1/clients/heartbeats`` of at most ``MAX_BATCH``: one request per credential and interval for a whole
fleet's registrations, where each used to send its own. A heartbeat refused alone (403: another principal's client,
a group beyond the rights) fails alone, with the error a single heartbeat gets. A name server without the batched
route (404 for the route itself) gets single heartbeats. Watches and unregistrations go through as they are.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from graymq.client.nameserver_client import NameServerClient, NotFoundError, status_error
from graymq.protocol.errors import GrayMQError

log = logging.getLogger(__name__)

WINDOW_S = 0.02  # heartbeats arriving within it share a request
MAX_BATCH = 100  # heartbeats a request (the name server takes up to 500; a request stays far below its body limit)
PATH = "/v1/clients/heartbeats"

Pending = tuple[dict[str, Any], asyncio.Future[dict[str, Any]]]


class BatchedHeartbeats:
    """A ``MembershipLink`` over ``nameserver`` whose heartbeats are batched; ``await close()`` closes it."""

    def __init__(self, nameserver: NameServerClient) -> None:
        self.nameserver = nameserver
        self.requests = 0  # batched requests sent
        self._pending: list[Pending] = []
        self._sender: asyncio.Task[None] | None = None
        self._batched = True  # False once the name server answered that it has no batched route

    async def client_heartbeat(self, body: dict[str, Any]) -> dict[str, Any]:
        if not self._batched:
            return await self.nameserver.client_heartbeat(body)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending.append((body, future))
        if self._sender is None:
            self._sender = asyncio.get_running_loop().create_task(self._send(), name="stock client heartbeats")
        return await future

    async def watch_client(self, body: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        return await self.nameserver.watch_client(body, timeout_s)

    async def unregister_client(self, group: str, client_id: str, role: str) -> None:
        await self.nameserver.unregister_client(group, client_id, role)

    async def close(self) -> None:
        if self._sender is not None:
            self._sender.cancel()
            await asyncio.gather(self._sender, return_exceptions=True)
        for _, future in self._pending:
            future.cancel()
        await self.nameserver.close()

    async def _send(self) -> None:
        try:
            await asyncio.sleep(WINDOW_S)
            while self._pending:
                batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
                await self._send_batch(batch)
        finally:
            self._sender = None

    async def _send_batch(self, batch: list[Pending]) -> None:
        try:
            answer = await self.nameserver.request("POST", PATH, json={"heartbeats": [body for body, _ in batch]})
        except NotFoundError:
            log.info("the name server has no %s: stock clients' heartbeats go one by one", PATH)
            self._batched = False
            await asyncio.gather(*(self._single(body, future) for body, future in batch))
            return
        except GrayMQError as exc:
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        self.requests += 1
        for (body, future), result in zip(batch, answer["results"], strict=True):
            if future.done():
                continue
            if result["status_code"] < 300:
                future.set_result(result["answer"])
            else:
                text = f"{result.get('error')}: {result.get('detail')}"
                future.set_exception(status_error(result["status_code"], f"POST {PATH} ({body['client_id']})", text,
                                                  result.get("detail")))

    async def _single(self, body: dict[str, Any], future: asyncio.Future[dict[str, Any]]) -> None:
        try:
            answer = await self.nameserver.client_heartbeat(body)
        except GrayMQError as exc:
            if not future.done():
                future.set_exception(exc)
        else:
            if not future.done():
                future.set_result(answer)
