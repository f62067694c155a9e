"""Promote and rollback started from the console, run inside the name server as background tasks.

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

from graymq.client.nameserver_client import NameServerClient
from graymq.nameserver.console.actions import Cutover, PromoteAction
from graymq.protocol.errors import GrayMQError
from graymq.runbooks.cutover import CutoverFailed, CutoverRunner
from graymq.runbooks.progress import Progress

log = logging.getLogger(__name__)


class LogStream(io.StringIO):
    """Where a runner's progress goes: the name server's debug log, line by line."""

    def write(self, text: str) -> int:
        for line in text.splitlines():
            if line.strip():
                log.debug("%s", line.strip())
        return len(text)


class ConsoleOperations:
    """The cutovers this name server runs; ``stop`` cancels them (their records stay RUNNING, resumable)."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, group: str, action: Cutover, nameserver_url: str, token: str | None) -> asyncio.Task[None]:
        """Run ``action`` on ``group`` in the background as the holder of ``token`` (None: dev mode, no token)."""
        task = asyncio.create_task(_run(group, action, nameserver_url, token), name=f"console {action.action} {group}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def stop(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _run(group: str, action: Cutover, nameserver_url: str, token: str | None) -> None:
    nameserver = NameServerClient(nameserver_url, token=token, admin_token=token)
    runner = CutoverRunner(nameserver, group, progress=Progress(stream=LogStream()))
    try:
        report = await (runner.promote() if isinstance(action, PromoteAction) else runner.rollback(action.mode))
        log.info("console %s of %s: %s", action.action, group, report.state)
    except CutoverFailed as exc:  # the runner recorded the operation FAILED with its report
        log.warning("console %s of %s failed: %s", action.action, group, exc.message)
    except GrayMQError as exc:
        log.error("console %s of %s stopped, its record stays RUNNING (`graymq gray %s %s` resumes it): %s",
                  action.action, group, action.action, group, exc.message)
    finally:
        await runner.close()
        await nameserver.close()
