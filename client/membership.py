"""This client's registration in the name server: it reports its flag and state, and learns the desired flag.

One heartbeat per interval (and on demand). The response — desired flag, the group's gray
switch, orphan policy and queue layouts — goes to ``on_update``; while every name server is
down the client keeps its last known values.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from client.nameserver_client import NameServerClient
from protocol.aio import cancel_and_wait, wait_event
from protocol.errors import GrayMQError

log = logging.getLogger(__name__)


def new_client_id(role: str) -> str:
    return f"{socket.gethostname()}@{os.getpid()}@{role}-{uuid.uuid4().hex[:8]}"


class Membership:
    def __init__(
        self,
        nameserver: NameServerClient,
        *,
        group: str,
        client_id: str,
        role: str,
        labels: dict[str, str],
        declared_gray: bool | None,
        interval_s: float,
        report: Callable[[], dict[str, Any]],
        on_update: Callable[[dict[str, Any]], Awaitable[None]],
    ) -> None:
        self.nameserver = nameserver
        self.group = group
        self.client_id = client_id
        self.role = role
        self.labels = labels
        self.declared_gray = declared_gray
        self.interval_s = interval_s
        self._report = report
        self._on_update = on_update
        self.last: dict[str, Any] | None = None
        self.reachable = False
        self.epoch = 0  # bumped on every local change; answers to older reports are stale
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    async def beat(self) -> dict[str, Any] | None:
        """One heartbeat now; returns the response, or None when no name server answered.

        An answer to a report sent before the latest local change is not acted on: it would
        undo that change (e.g. a stale "desired gray" arriving just after a drained flip).
        """
        sent_epoch = self.epoch
        body = {"group": self.group, "client_id": self.client_id, "role": self.role, "labels": self.labels,
                "declared_gray": self.declared_gray, **self._report()}
        try:
            response = await self.nameserver.client_heartbeat(body)
        except GrayMQError as exc:
            if self.reachable or self.last is None:
                log.warning("%s %s: name server heartbeat failed: %s", self.role, self.client_id, exc.message)
            self.reachable = False
            return None
        self.reachable = True
        self.last = response
        if sent_epoch == self.epoch:
            await self._on_update(response)
        return response

    def poke(self) -> None:
        """Heartbeat as soon as possible."""
        self._wake.set()

    def changed(self) -> None:
        """The client changed its flag, state or declaration: older answers are stale; report soon."""
        self.epoch += 1
        self._wake.set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"membership {self.client_id}")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)

    async def _run(self) -> None:
        while True:
            await wait_event(self._wake, self.interval_s)
            self._wake.clear()
            try:
                await self.beat()
            except Exception:
                log.exception("membership update of %s failed", self.client_id)
