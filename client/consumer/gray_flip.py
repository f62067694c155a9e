"""A push consumer following its desired flag: normal → gray at once, gray → normal after draining its gray queues.

- normal → gray: applied at once; the normal queues it held are released (offsets committed)
  and the other normal clients take them over from there; nothing to drain.
- gray → normal: DRAINING — it keeps consuming its gray queues until, for every gray queue of
  every subscribed topic (retry topic included, delayed retries counted), the group's
  committed offset equals the max offset; then it reports normal to the name server first,
  heartbeats the brokers (which push "group changed") and rebalances onto normal queues.
  A drain that times out leaves the client gray and says why; nothing is lost.
- with the group's gray switch off every queue is normal, so a flip needs no drain.

The transitions are ``GrayState``'s; ``GrayFlip`` does what they call for through its consumer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol

from graymq.client.gray_state import GrayState, Step
from graymq.client.membership import Membership
from graymq.protocol.errors import DrainTimeoutError
from graymq.protocol.supervisor import Supervisor

log = logging.getLogger(__name__)


class FlipHost(Protocol):
    """What a flip uses of its consumer."""

    client_id: str
    group: str
    gray_switch: bool
    membership: Membership

    async def gray_backlog(self) -> int | None: ...

    async def _persist_offsets(self) -> None: ...

    async def _release_queues(self, keep_adopted: bool) -> None:
        """Stop pulling the queues held (those held by adoption too unless ``keep_adopted``), in-flight finished."""

    async def _announce(self) -> None:
        """Tell the name server and the brokers about the new flag; rebalance."""


class GrayFlip:
    """Follows the desired flag for ``host``; ``drain_and_flip`` drains on the application's request.

    Until ``follow_changes()`` (the consumer has not consumed yet) the desired flag is taken as is.
    """

    def __init__(self, host: FlipHost, gray: bool, tasks: Supervisor, *, drain_timeout_s: float,
                 drain_poll_s: float) -> None:
        self.host = host
        self.gray_state = GrayState(gray)
        self.drain_timeout_s = drain_timeout_s
        self.drain_poll_s = drain_poll_s
        self.last_drain_error = ""
        self._tasks = tasks
        self._following = False
        self._drain_task: asyncio.Task[None] | None = None
        self._drain_lock = asyncio.Lock()

    def follow_changes(self) -> None:
        """From now on a change of the desired flag flips (the consumer is about to consume)."""
        self._following = True

    def cancel(self) -> None:
        """Cancel a drain under way (the consumer stops)."""
        if self._drain_task is not None:
            self._drain_task.cancel()

    async def follow(self, desired: bool) -> None:
        """Act on the desired flag of a name server answer."""
        host = self.host
        if not self._following:
            self.gray_state.adopt(desired)  # nothing consumed yet: take the desired flag as is
            return
        step = self.gray_state.follow(desired, draining=self._drain_task is not None)
        if step is Step.BECOME_GRAY:
            await self._flip_to_gray()
        elif step is Step.ABANDON_DRAIN and self._drain_task is not None:
            self._drain_task.cancel()
            self._drain_task = None
            self.gray_state.abandon_drain()
            host.membership.changed()
            log.info("consumer %s: desired flag back to gray, drain cancelled", host.client_id)
        elif step is Step.DRAIN:
            self._drain_task = asyncio.get_running_loop().create_task(self._auto_drain(), name="drain")
            self._tasks.watch(self._drain_task)  # an unexpected error is logged; the next update starts a new one

    async def drain_and_flip(self, timeout_s: float | None = None) -> None:
        """Consume the gray queues dry, then become normal. Raises ``DrainTimeoutError`` (still gray).

        Called by the application, it also withdraws the client's own gray declaration, so the
        name server's desired flag follows unless an explicit flag or a rule says gray.
        """
        membership = self.host.membership
        async with self._drain_lock:
            declared = membership.declared_gray
            membership.declared_gray = False if declared else declared
            membership.changed()
            try:
                await self._drain(timeout_s)
            except DrainTimeoutError:
                membership.declared_gray = declared
                membership.changed()
                raise

    async def _auto_drain(self) -> None:
        try:
            async with self._drain_lock:
                await self._drain(None)
        except DrainTimeoutError as exc:
            log.warning("%s; will retry while the desired flag stays normal", exc.message)
        finally:
            self._drain_task = None

    async def _drain(self, timeout_s: float | None) -> None:
        host = self.host
        if not self.gray_state.gray:
            return
        if not host.gray_switch:
            await self._flip_to_normal()
            return
        self.gray_state.begin_drain(timeout_s if timeout_s is not None else self.drain_timeout_s, time.monotonic())
        host.membership.changed()
        log.info("consumer %s draining gray queues of %s", host.client_id, host.group)
        while True:
            await host._persist_offsets()
            backlog = await host.gray_backlog()
            if backlog == 0 and await self._flip_to_normal():
                return
            if self.gray_state.timed_out(time.monotonic()):
                self.gray_state.drain_timed_out()
                self.last_drain_error = (
                    f"drain timed out with {backlog if backlog is not None else 'an unknown number of'} gray "
                    "messages left (are gray producers still sending? is a broker or the name server down?)"
                )
                host.membership.changed()
                raise DrainTimeoutError(f"consumer {host.client_id}: {self.last_drain_error}")
            await asyncio.sleep(self.drain_poll_s)

    async def _flip_to_gray(self) -> None:
        host = self.host
        log.info("consumer %s of %s: normal -> gray (no drain needed)", host.client_id, host.group)
        await host._release_queues(keep_adopted=False)
        self.gray_state.become_gray()
        host.membership.changed()
        await host._announce()

    async def _flip_to_normal(self) -> bool:
        """Report normal to the name server first, then to the brokers. False if the name server is unreachable."""
        host = self.host
        self.gray_state.flip_to_normal()
        host.membership.changed()
        if await host.membership.beat() is None:
            self.gray_state.normal_unheard()
            host.membership.changed()
            return False
        log.info("consumer %s of %s: gray queues drained, now normal", host.client_id, host.group)
        await host._release_queues(keep_adopted=True)
        await host._announce()
        return True
