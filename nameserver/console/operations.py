"""Promote and rollback started from the console, run inside the name server as background tasks, and the registry
of every operation the console runs (rollouts too), one per group.

Each runs the same runbook as ``graymq gray promote|rollback`` (``CutoverRunner``), talking to this name server
over its own address with the caller's token, so every step is authorised and audited as that caller. The
operation is a cutover record in the database: one RUNNING record per group however many name servers share the
database, watched from any of them; one stopped midway (its name server restarted) is resumed by running the
same ``graymq gray`` command.
"""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from graymq.nameserver.console.actions import Cutover, PromoteAction
from graymq.nameserver.errors import ApiError
from graymq.nameserver_api.client import NameServerClient
from graymq.protocol.errors import ConfigError, GrayMQError
from graymq.protocol.operations import CutoverMode
from graymq.runbooks.cutover import CutoverFailed, CutoverRunner
from graymq.runbooks.policy import RUNBOOK_TIMEOUT_S, CutoverPolicy
from graymq.runbooks.progress import Progress

log = logging.getLogger(__name__)


class LogStream(io.StringIO):
    """Where a runner's progress goes: the name server's debug log, line by line."""

    def write(self, text: str) -> int:
        for line in text.splitlines():
            if line.strip():
                log.debug("%s", line.strip())
        return len(text)


@dataclass
class Started:
    """An operation the console started on a group: its kind (promote, rollback, rollout), the newest operation id
    the group had before it (its record is the first one after) and the task running it."""

    what: str
    after_id: int
    task: asyncio.Task[None]


class ConsoleOperations:
    """The operations (promote, rollback, rollout) this name server's console runs, at most one per group: a second
    start while one runs (a double click) is answered that one (``running``), no second runner takes it over.
    ``stop`` cancels them (their records stay RUNNING, resumable)."""

    def __init__(self) -> None:
        self._started: dict[str, Started] = {}  # by group

    def running(self, group: str) -> Started | None:
        """What the console runs on ``group`` now, if anything."""
        started = self._started.get(group)
        return started if started is not None and not started.task.done() else None

    def start(self, group: str, what: str, after_id: int, work: Coroutine[Any, Any, None]) -> Started:
        """Run ``work`` (the ``what`` of ``group``) in the background; the group must have nothing ``running``."""
        if self.running(group) is not None:
            work.close()
            raise RuntimeError(f"the console already runs an operation on {group}")
        started = Started(what, after_id, asyncio.create_task(work, name=f"console {what} {group}"))
        self._started[group] = started
        started.task.add_done_callback(lambda _: self._forget(group, started))
        return started

    def _forget(self, group: str, started: Started) -> None:
        if self._started.get(group) is started:
            del self._started[group]

    async def stop(self) -> None:
        tasks = [started.task for started in self._started.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def console_policy(mode: str = CutoverMode.DRAIN, timeout_s: float = RUNBOOK_TIMEOUT_S) -> CutoverPolicy:
    """The policy of an operation the console runs, from what its form and REST body give (a rollback's mode, a
    rollout's timeout); the rest are the CLI's defaults. A value out of range is a 400 naming the CLI's option."""
    try:
        return CutoverPolicy(mode=CutoverMode(mode), timeout_s=timeout_s)
    except ConfigError as exc:
        raise ApiError(exc.message) from None


async def run_cutover(group: str, action: Cutover, nameserver_url: str, token: str | None) -> None:
    """Run ``action`` on ``group`` as the holder of ``token`` (None: dev mode, no token)."""
    nameserver = NameServerClient(nameserver_url, token=token, admin_token=token)
    policy = console_policy() if isinstance(action, PromoteAction) else console_policy(action.mode)
    runner = CutoverRunner(nameserver, group, policy, Progress(stream=LogStream()))
    try:
        report = await (runner.promote() if isinstance(action, PromoteAction) else runner.rollback())
        log.info("console %s of %s: %s", action.action, group, report.state)
    except CutoverFailed as exc:  # the runner recorded the operation FAILED with its report
        log.warning("console %s of %s failed: %s", action.action, group, exc.message)
    except GrayMQError as exc:
        log.error("console %s of %s stopped, its record stays RUNNING (`graymq gray %s %s` resumes it): %s",
                  action.action, group, action.action, group, exc.message)
    finally:
        await runner.close()
        await nameserver.close()
