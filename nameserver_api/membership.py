"""This client's registration in the name server: it reports its flag and state, and learns the desired flag.

One heartbeat per interval (and on demand). The response — desired flag, the group's gray
switch, orphan policy and queue layouts — goes to ``on_update``; while every name server is
down the client keeps its last known values.

Between heartbeats a watch (a long poll on the name server) returns as soon as an operator's
change alters the desired flag, switch or orphan policy, so a flip applies in milliseconds
rather than at the next heartbeat; when watching fails the heartbeats carry the change.

An answer to a request sent before the client's latest change is stale for the client's own flag (it may
undo that change), not for the group's settings: those an ``on_settings`` callback, when given, acts on at once
(a switch flipped while a consumer's drain went on reaches it with the watch that carries it, not a heartbeat later).
A change the client made following an answer (a flip, a drain, a retirement: ``changed(after=...)``) makes stale
only the requests sent before that answer came: one sent since reads a name server that knew what the answer said,
and what the client reports (its flag, state, queues) is no input of the flag the name server answers, so a
switch-on carried by a watch sent after the switch-off the client followed acts at once, not a heartbeat later.

A clean stop unregisters, so the client leaves its group in the name server at once rather
than when its heartbeats go stale.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from graymq.nameserver_api.client import ConflictError
from graymq.nameserver_api.records import HeartbeatAnswer
from graymq.protocol.aio import cancel_and_wait, wait_event
from graymq.protocol.errors import GrayMQError

log = logging.getLogger(__name__)

# what a watch compares
WATCHED = ("desired_gray", "gray_switch", "orphan_policy", "gray_weight", "gray_retired", "gray_marks", "lane_marks",
           "frozen_lanes", "desired_lane", "lanes")
# One watch's timeout on the name server (it allows 60 s; the answer's grace keeps the read under a proxy's usual
# minute). Each round that times out has the name server read every watched client's view again: 20 s rounds were a
# fifth of its steady time at 5,000 clients.
WATCH_S = 50.0
WATCH_RETRY_S = 5.0  # after a failed watch (heartbeats go on meanwhile)


class MembershipLink(Protocol):
    """What a membership asks of the name server (a ``NameServerClient``, or heartbeats batched over one)."""

    async def client_heartbeat(self, body: dict[str, Any]) -> HeartbeatAnswer | None:
        """The heartbeat's answer; None when only its liveness was refreshed (an alive beat: nothing changed, the
        latest answer holds)."""

    async def watch_client(self, body: dict[str, Any], timeout_s: float) -> HeartbeatAnswer: ...

    async def unregister_client(self, group: str, client_id: str, role: str) -> None: ...


def declared_fields(declared: bool | str | None) -> dict[str, Any]:
    """A heartbeat's declaration: ``declared_gray`` as before, and ``declared_lane`` when a lane was named.

    >>> declared_fields("v3"), declared_fields(True)
    ({'declared_gray': True, 'declared_lane': 'v3'}, {'declared_gray': True})
    """
    if isinstance(declared, str):
        return {"declared_gray": True, "declared_lane": declared}
    return {"declared_gray": declared}


def new_client_id(role: str) -> str:
    return f"{socket.gethostname()}@{os.getpid()}@{role}-{uuid.uuid4().hex[:8]}"


class Membership:
    def __init__(
        self,
        nameserver: MembershipLink,
        *,
        group: str,
        client_id: str,
        role: str,
        labels: dict[str, str],
        declared_gray: bool | str | None,
        interval_s: float,
        report: Callable[[], dict[str, Any]],
        on_update: Callable[[HeartbeatAnswer], Awaitable[None]],
        on_settings: Callable[[HeartbeatAnswer], Awaitable[None]] | None = None,
        on_permanent: Callable[[GrayMQError], None] | None = None,
        aligned: bool = False,
        log_failures: bool = True,
    ) -> None:
        self.nameserver = nameserver
        self.aligned = aligned  # beat on the interval's grid of the monotonic clock: memberships beat together
        self.group = group
        self.client_id = client_id
        self.role = role
        self.labels = labels
        self.declared_gray = declared_gray  # what the client was started with: a flag, or a lane's name
        self.interval_s = interval_s
        self._report = report
        self._on_update = on_update
        self._on_settings = on_settings  # the group's settings of a stale answer (see the module docstring)
        self._on_permanent = on_permanent  # a heartbeat refused for good (rights, TLS trust): the loops end
        self.log_failures = log_failures  # False: whoever carries the heartbeats of many logs a failure once
        self.last: HeartbeatAnswer | None = None
        self.reachable = False
        self.epoch = 0  # a tick: bumped at every change and every answer; a request remembers the one it went at
        self.answer_epoch: int | None = None  # the tick the answer acted on (now, or last) came at
        self._fresh_from = 0  # answers to requests sent at an earlier tick are stale
        self.registered = False  # a heartbeat was sent: the name server may know this client
        self.reported: dict[str, Any] | None = None  # the client's report in the last heartbeat sent
        self._tasks: list[asyncio.Task[None]] = []
        self._wake = asyncio.Event()
        self._applying = asyncio.Lock()  # answers are acted on one at a time

    async def beat(self, first: bool = False) -> HeartbeatAnswer | None:
        """One heartbeat now; returns the response, or None when no name server answered. A permanent error
        (``GrayMQError.permanent``: a missing right, a certificate that does not verify) is raised, and on the
        ``first`` beat (a client starting) a refusal too (``ConflictError``: e.g. no free slot for its lane).

        An answer to a report sent before the latest local change is not acted on: it would
        undo that change (e.g. a stale "desired gray" arriving just after a drained flip).
        """
        sent_epoch = self.epoch
        self.reported = self._report()
        body = {"group": self.group, "client_id": self.client_id, "role": self.role, "labels": self.labels,
                **declared_fields(self.declared_gray), **self.reported}
        self.registered = True
        try:
            response = await self.nameserver.client_heartbeat(body)
        except GrayMQError as exc:
            if exc.permanent or (first and isinstance(exc, ConflictError)):
                self.registered = self.last is not None  # refused from the first beat: nothing to unregister
                raise
            if self.log_failures and (self.reachable or self.last is None):
                log.warning("%s %s: name server heartbeat failed: %s", self.role, self.client_id, exc.message)
            self.reachable = False
            return None
        self.reachable = True
        came = self.tick()
        if response is None:  # an alive beat: the latest answer (a heartbeat's or a watch's) holds, but its lane maps
            if self.last is None:
                return None
            response = self.last.retold()
        else:
            self.last = response
        await self._apply(response, sent_epoch, came)
        return response

    async def _apply(self, response: HeartbeatAnswer, sent_epoch: int, came: int) -> bool:
        """Act on an answer (to a request sent at tick ``sent_epoch``, come at tick ``came``) unless the client
        changed since it asked (then only on its group's settings, through ``on_settings``); False when stale."""
        async with self._applying:
            self.answer_epoch = came
            if sent_epoch < self._fresh_from:
                if self._on_settings is not None:
                    await self._on_settings(response)
                return False
            await self._on_update(response)
            return True

    def poke(self) -> None:
        """Heartbeat as soon as possible."""
        self._wake.set()

    def report_changed(self) -> bool:
        """The client's report (flag, state, queues...) differs from the one its last heartbeat carried (False
        before the first): the name server reads a stale one until the next beat."""
        return self.reported is not None and self._report() != self.reported

    def tick(self) -> int:
        """The next tick of this membership's history (a request sent, an answer come, a change)."""
        self.epoch += 1
        return self.epoch

    def changed(self, after: int | None = None) -> None:
        """The client changed its flag, state or declaration: answers to requests sent before are stale; report
        soon. ``after``: the change follows the answer that came at that tick (``answer_epoch``), and only the
        answers to requests sent before that one came are stale (see the module docstring)."""
        tick = self.tick()
        self._fresh_from = tick if after is None else max(self._fresh_from, after)
        self._wake.set()

    def start(self, watch: bool = True) -> None:
        """Heartbeat, and watch unless ``watch`` is False (a watcher of many memberships calls ``watched``)."""
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._run(), name=f"membership {self.client_id}")]
        if watch:
            self._tasks.append(loop.create_task(self._watch(), name=f"watch {self.client_id}"))

    async def stop(self) -> None:
        """Stop heartbeating and watching (the client stays registered until ``unregister`` or it goes stale)."""
        for task in self._tasks:
            await cancel_and_wait(task)

    async def unregister(self) -> None:
        """Leave the group in the name server now (after ``stop``); a failure is logged, the client then goes stale."""
        if not self.registered:
            return
        try:
            await self.nameserver.unregister_client(self.group, self.client_id, self.role)
        except GrayMQError as exc:
            log.warning("%s %s: could not unregister from the name server (%s); it goes stale instead",
                        self.role, self.client_id, exc.message)
            return
        self.registered = False
        log.info("%s %s left group %s", self.role, self.client_id, self.group)

    async def _run(self) -> None:
        while True:
            await wait_event(self._wake, self.interval_s - time.monotonic() % self.interval_s if self.aligned
                             else self.interval_s)
            self._wake.clear()
            try:
                await self.beat()
            except GrayMQError as exc:
                if exc.permanent:
                    log.error("%s %s: the name server refuses its heartbeats: %s (%s)", self.role, self.client_id,
                              exc.message, exc.code_name)
                    if self._on_permanent is not None:
                        self._on_permanent(exc)
                    return
                log.exception("membership update of %s failed", self.client_id)
            except Exception:
                log.exception("membership update of %s failed", self.client_id)

    def watch_body(self) -> dict[str, Any] | None:
        """What a watch of this client asks now: what the last answer said; None until a name server answered.

        A client whose latest heartbeat failed is watched all the same: its last answer is what it acts on until
        one changes it, and a watch carries the change as soon as a name server can answer (else it would wait for
        a heartbeat to go through, and a round for it to join)."""
        last = self.last
        if last is None:
            return None
        return {"group": self.group, "client_id": self.client_id, "role": self.role,
                "known": {key: getattr(last, key) for key in WATCHED}}

    async def watched(self, body: dict[str, Any], response: HeartbeatAnswer, sent_epoch: int) -> None:
        """A watch's ``response`` to ``body`` (sent at ``sent_epoch``): acted on when it differs from what was known.

        A stale answer (the client changed meanwhile) is not acted on; a heartbeat follows at once.
        """
        came = self.tick()
        if all(getattr(response, key) == value for key, value in body["known"].items()):
            return
        log.debug("%s %s: watch saw %s", self.role, self.client_id, {k: getattr(response, k) for k in WATCHED})
        self.last = response
        if not await self._apply(response, sent_epoch, came):
            self.poke()

    async def _watch(self) -> None:
        """Watch the name server for a change of what the last answer said, and act on it at once."""
        while True:
            body = self.watch_body()
            if body is None:
                await asyncio.sleep(self.interval_s)
                continue
            sent_epoch = self.epoch
            try:
                response = await self.nameserver.watch_client(body, WATCH_S)
            except GrayMQError as exc:
                log.debug("%s %s: watch failed (%s); heartbeats carry changes", self.role, self.client_id, exc.message)
                await asyncio.sleep(max(self.interval_s, WATCH_RETRY_S))
                continue
            except Exception:
                log.exception("watch of %s failed", self.client_id)
                await asyncio.sleep(max(self.interval_s, WATCH_RETRY_S))
                continue
            await self.watched(body, response, sent_epoch)
