"""Auto-renewed deliveries: what a stock PushConsumer received stays invisible while its client is connected.

A PushConsumer's ReceiveMessage asks for ``auto_renew`` and names no invisible time: it leaves renewing to the
server, as RocketMQ's proxy does it. Each such delivery is handed out for the endpoint's ``auto_renew_invisible_s``
(``settings``) and renewed for as long again (the pop state's change of invisible time) once half of it has passed,
leaving the other half for a late renewal (a busy event loop) — while its client still has its telemetry session open
(``present``) and for at most ``auto_renew_max_s`` after it was received. Then, or as soon as the client is gone (its
process died, it shut down), renewals stop and the message comes back when its last invisible time runs out
(delivered again, attempt + 1): a consumer gone holds a message one invisible time at most after it left. The proxy
renews the same way (while the client's channel is registered, up to its maximum renew time) but hands a departed
client's messages back at once; here presence is asked at each renewal only, so a client whose stream blinked (the
SDK reopening it) keeps renewing what it is still processing.

The client keeps the receipt handle it received, and each renewal signs a new one: an ack, a change of invisible
time or a dead-letter forward by the client's handle is done with the current one (``take``), and ends its renewals.
A change of invisible time is the client's own decision (a failed consumption's backoff), so it is not renewed.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from graymq.broker_ext.pop.receipt import InvalidReceiptHandle
from graymq.broker_ext.pop.service import PopService
from graymq.protocol.aio import cancel_and_wait
from graymq.protocol.errors import GrayMQError

log = logging.getLogger(__name__)

RENEW_AFTER = 0.5  # of a delivery's invisible time: when it is renewed
COMPACT_AFTER = 1024  # heap entries of deliveries no longer renewed before the heap may be rebuilt without them


@dataclass(slots=True)
class Renewal:
    """One auto-renewed delivery: whose, its current receipt handle, and when it was received."""

    client_id: str
    group: str
    topic: str
    handle: str
    invisible_ms: int
    received_at: float
    expires_at: float  # when the current handle's invisible time runs out
    renewing: bool = True  # False: no more renewals, the client's handle still maps to the current one until it expires


class AutoRenewals:
    """``track`` a delivery at its receive, ``take`` it at its ack (or change, or forward); ``start`` / ``stop`` the
    renewing task."""

    def __init__(self, pop: PopService, present: Callable[[str], bool], max_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._pop = pop
        self._present = present  # client id -> its telemetry session is open
        self.max_s = max_s
        self._clock = clock
        self.renewals: dict[str, Renewal] = {}  # the handle the client holds -> its renewal
        self._due: list[tuple[float, int, str]] = []  # (renew at, serial, the client's handle), a heap
        self._serials = itertools.count()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.renewed = 0  # renewals made (a metric)

    def track(self, client_id: str, group: str, topic: str, handle: str, invisible_ms: int) -> None:
        """Renew the delivery ``handle`` of ``client_id`` until it is taken, its client is gone or ``max_s`` passed."""
        now = self._clock()
        self.renewals[handle] = Renewal(client_id, group, topic, handle, invisible_ms, now, now + invisible_ms / 1000)
        self._schedule(handle, now + invisible_ms / 1000 * RENEW_AFTER)

    def take(self, group: str, topic: str, handle: str) -> str:
        """The current handle of the delivery the client holds as ``handle`` (``handle`` itself when it is not renewed
        here, or names another group or topic: the pop state judges it), renewed no more."""
        renewal = self.renewals.get(handle)
        if renewal is None or (renewal.group, renewal.topic) != (group, topic):
            return handle
        del self.renewals[handle]
        return renewal.handle

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="grpc-auto-renewals")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    def _schedule(self, handle: str, at: float) -> None:
        if self._due and len(self._due) > COMPACT_AFTER and len(self._due) > 2 * len(self.renewals):
            self._due = [entry for entry in self._due if entry[2] in self.renewals]
            heapq.heapify(self._due)
        earliest = self._due[0][0] if self._due else None
        heapq.heappush(self._due, (at, next(self._serials), handle))
        if earliest is None or at < earliest:
            self._wake.set()

    def renew_due(self) -> float | None:
        """Renew (or let go) every delivery due by now; when the next one is due (None: none is tracked)."""
        now = self._clock()
        while self._due and self._due[0][0] <= now:
            self._renew(heapq.heappop(self._due)[2], now)
        return self._due[0][0] if self._due else None

    async def _run(self) -> None:
        while True:
            next_at = self.renew_due()
            self._wake.clear()
            wait = None if next_at is None else max(0.0, next_at - self._clock())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)

    def _renew(self, handle: str, now: float) -> None:
        """Renew one delivery now, or stop renewing it (its client gone, renewed long enough): it comes back when its
        invisible time runs out, and until then the client's handle still names it; then it is forgotten."""
        renewal = self.renewals.get(handle)
        if renewal is None:  # acked, changed or forwarded since
            return
        if not renewal.renewing:  # its last invisible time is over: delivered again
            del self.renewals[handle]
            return
        if not self._present(renewal.client_id) or now - renewal.received_at >= self.max_s:
            renewal.renewing = False
            self._schedule(handle, renewal.expires_at)
            return
        try:
            renewal.handle = self._pop.change_invisible(renewal.group, renewal.topic, renewal.handle,
                                                        renewal.invisible_ms)
        except InvalidReceiptHandle:  # its invisible time ran out before this renewal: delivered again
            del self.renewals[handle]
            return
        except GrayMQError as error:  # this broker may not change consumption state now (a follower)
            log.warning("auto-renewal of a delivery to %s stopped: %s", renewal.client_id, error.message)
            del self.renewals[handle]
            return
        self.renewed += 1
        renewal.expires_at = now + renewal.invisible_ms / 1000
        self._schedule(handle, now + renewal.invisible_ms / 1000 * RENEW_AFTER)
