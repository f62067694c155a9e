"""Waiting, bounded, until every live broker serves a topic with its configured layout.

A broker reports the topics it serves in every registration; a registration changing what it reports (or a broker
coming live) wakes the waiters (on PostgreSQL through every replica), which then re-read the brokers' reports. A
broker's lease running out wakes none: the waiters re-read every ``RECHECK_S`` all the same.
"""

from __future__ import annotations

import time

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import State

from graymq.nameserver.schemas import TopicConfig
from graymq.nameserver.services.registry import RegistryService
from graymq.nameserver.watch import BROKER_REGISTERED, GroupChanges, wait_changed

# Re-read at least this often, should a wake-up be missed (a replica's LISTEN connection dropped).
RECHECK_S = 1.0


async def wait_until_served(state: State, config: TopicConfig, wait_s: float) -> tuple[list[str], list[str]]:
    """(ready, pending) live brokers once none is pending, or after ``wait_s`` seconds."""
    changes: GroupChanges = state.group_changes
    deadline = time.monotonic() + wait_s

    def read() -> tuple[list[str], list[str]]:
        with state.read_sessions() as session:
            return RegistryService(session, state.settings).readiness(config)

    while True:
        registered = changes.changed(BROKER_REGISTERED)
        ready, pending = await run_in_threadpool(read)
        remaining = deadline - time.monotonic()
        if not pending or remaining <= 0 or changes.closing:
            return ready, pending
        await wait_changed(registered, min(remaining, RECHECK_S))
