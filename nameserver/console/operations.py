"""Promote and rollback started from the console, run inside the name server as background tasks, and the registry
of every operation the console runs (rollouts too), one per group and lane.

Each runs the same runbook as ``graymq gray promote|rollback`` (``CutoverRunner``), talking to this name server
over its own address with the caller's token, so every step is authorised and audited as that caller. The
operation is a cutover record in the database: one RUNNING record per group and lane however many name servers share
the database, watched from any of them; one stopped midway (its name server restarted) is resumed by running the
same ``graymq gray`` command. One this console runs can be aborted from it: its runner stops where it is and the
record ends FAILED, naming who aborted it and at which step.
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
from graymq.nameserver.schemas import GRAY_LANE
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
    """An operation the console started on a group's lane: its kind (promote, rollback, rollout), the newest
    operation id the group had before it (its record is the first one of the lane after) and the task running it."""

    what: str
    after_id: int
    task: asyncio.Task[None]
    lane: str = GRAY_LANE


class ConsoleOperations:
    """The operations (promote, rollback, rollout) this name server's console runs, at most one per group and lane
    (lanes are promoted and rolled back on their own): a second start while one runs (a double click) is answered
    that one (``running``), no second runner takes it over. ``stop`` cancels them (their records stay RUNNING,
    resumable); ``cancel`` stops one where it is (an abort)."""

    def __init__(self) -> None:
        self._started: dict[tuple[str, str], Started] = {}  # by (group, lane)

    def running(self, group: str, lane: str = GRAY_LANE) -> Started | None:
        """What the console runs on ``group``'s ``lane`` now, if anything."""
        started = self._started.get((group, lane))
        return started if started is not None and not started.task.done() else None

    def start(self, group: str, what: str, after_id: int, work: Coroutine[Any, Any, None],
              lane: str = GRAY_LANE) -> Started:
        """Run ``work`` (the ``what`` of ``group``'s ``lane``) in the background; that lane must have nothing
        ``running``."""
        if self.running(group, lane) is not None:
            work.close()
            raise RuntimeError(f"the console already runs an operation on {group} (lane {lane})")
        key = (group, lane)
        started = Started(what, after_id, asyncio.create_task(work, name=f"console {what} {group} {lane}"), lane)
        self._started[key] = started
        started.task.add_done_callback(lambda _: self._forget(key, started))
        return started

    def _forget(self, key: tuple[str, str], started: Started) -> None:
        if self._started.get(key) is started:
            del self._started[key]

    async def cancel(self, started: Started) -> None:
        """Stop ``started`` where it is and wait until its runner has closed."""
        started.task.cancel()
        await asyncio.gather(started.task, return_exceptions=True)

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
    """Run ``action`` on ``group``'s lane as the holder of ``token`` (None: dev mode, no token)."""
    nameserver = NameServerClient(nameserver_url, token=token, admin_token=token)
    policy = console_policy() if isinstance(action, PromoteAction) else console_policy(action.mode)
    runner = CutoverRunner(nameserver, group, policy, Progress(stream=LogStream()), lane=action.lane)
    what = f"{action.action} of {group}" + ("" if action.lane == GRAY_LANE else f" lane {action.lane}")
    resume = f"graymq gray {action.action} {group}" + ("" if action.lane == GRAY_LANE else f" --lane {action.lane}")
    try:
        report = await (runner.promote() if isinstance(action, PromoteAction) else runner.rollback())
        log.info("console %s: %s", what, report.state)
    except CutoverFailed as exc:  # the runner recorded the operation FAILED with its report
        log.warning("console %s failed: %s", what, exc.message)
    except GrayMQError as exc:
        log.error("console %s stopped, its record stays RUNNING (`%s` resumes it): %s", what, resume, exc.message)
    finally:
        await runner.close()
        await nameserver.close()
